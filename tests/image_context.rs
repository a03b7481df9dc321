//! The container image as `docker build .` builds it, without a container engine. The
//! Dockerfile itself is read: its build stage's `WORKDIR`, `COPY` lines and the `RUN` line that
//! runs cargo. Exactly what those `COPY` lines copy is laid out in an empty directory, and that
//! `RUN` line runs there unchanged (`sh -c`, as Docker's shell form), offline against the crates
//! already fetched into `~/.cargo/registry`; then the binary the final stage copies is checked
//! as the Dockerfile checks it (`libcrypto.so.3`) and as OpenShift's payload scanner reads it
//! (`support::elf`). The final stage's user, entrypoint and ports are checked against the build
//! stage and `config/deploy/daemonset.yaml`.
//!
//! What this cannot show without an engine: the base images and their packages (UBI 9's gcc,
//! `openssl-devel`, `openssl-libs`), and the toolchain the image installs: the build runs with
//! this machine's cargo, and the Dockerfile's `RUST_VERSION` is only checked against
//! `rust-version` in `Cargo.toml`.
//!
//! The build is a release build with thin LTO (minutes on two cores the first time). Its target
//! directory is the test's own (`target/tmp/image-context/target`, which the context's `target`
//! links to, where the Dockerfile's `ldd` looks), so it never waits for the suite's build lock,
//! and the copied files keep their modification times, so an unchanged tree is not rebuilt. The
//! context itself is laid out outside the checkout (under the system's temporary directory, one
//! per checkout): cargo reads every `.cargo/config.toml` above the directory it runs in, and the
//! checkout's own would be one that Docker's build never sees.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser as _;
use machine_config_server::cli::Cli;
use support::{elf, mcs};

// ---------------------------------------------------------------------------------------------
// The Dockerfile, parsed
// ---------------------------------------------------------------------------------------------

/// One instruction: its keyword (upper case), its arguments with continuation lines joined,
/// and the line it starts on (for messages).
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
    line: usize,
}

/// A build stage: `FROM image [AS name]` and the instructions up to the next `FROM`.
#[derive(Debug)]
struct Stage {
    name: Option<String>,
    instructions: Vec<Instruction>,
}

impl Stage {
    fn all(&self, keyword: &str) -> impl Iterator<Item = &Instruction> {
        let keyword = keyword.to_string();
        self.instructions
            .iter()
            .filter(move |i| i.keyword == keyword)
    }

    /// The last instance of an instruction that only its last instance counts for (`USER`,
    /// `ENTRYPOINT`).
    fn last(&self, keyword: &str) -> &Instruction {
        self.all(keyword)
            .last()
            .unwrap_or_else(|| panic!("the stage {:?} has no {keyword}", self.name))
    }
}

/// The stages of a Dockerfile. Comment lines are dropped (inside continuations too, as Docker
/// drops them), `\` at the end of a line continues the instruction; parser directives and
/// other escape characters are not used by this project's Dockerfile and not modelled.
fn parse_dockerfile(text: &str) -> Vec<Stage> {
    let mut instructions = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_none()) {
            continue;
        }
        let (line, mut joined) = pending.take().unwrap_or((index + 1, String::new()));
        match raw.trim_end().strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                pending = Some((line, joined));
            }
            None => {
                joined.push_str(raw);
                let joined = joined.trim();
                let (keyword, args) = joined
                    .split_once(char::is_whitespace)
                    .unwrap_or((joined, ""));
                instructions.push(Instruction {
                    keyword: keyword.to_ascii_uppercase(),
                    args: args.trim().to_string(),
                    line,
                });
            }
        }
    }
    assert!(
        pending.is_none(),
        "the Dockerfile ends inside a continued line"
    );

    let mut stages: Vec<Stage> = Vec::new();
    for instruction in instructions {
        if instruction.keyword == "FROM" {
            let words: Vec<&str> = instruction.args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_image] => None,
                [_image, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                _ => panic!(
                    "line {}: FROM {} not understood",
                    instruction.line, instruction.args
                ),
            };
            stages.push(Stage {
                name,
                instructions: Vec::new(),
            });
        } else {
            let line = instruction.line;
            stages
                .last_mut()
                .unwrap_or_else(|| panic!("line {line}: an instruction before the first FROM"))
                .instructions
                .push(instruction);
        }
    }
    stages
}

/// A `COPY` instruction: its `--from` stage if any, sources and destination. Flags that change
/// what is copied (`--parents`, `--exclude`) are not modelled and fail the test; `--chown`,
/// `--chmod` and `--link` do not change which files the build sees.
#[derive(Debug, PartialEq)]
struct Copy {
    from: Option<String>,
    sources: Vec<String>,
    destination: String,
}

fn parse_copy(instruction: &Instruction) -> Copy {
    let mut from = None;
    let mut paths = Vec::new();
    let words: Vec<String> = if instruction.args.starts_with('[') {
        serde_json::from_str(&instruction.args)
            .unwrap_or_else(|e| panic!("line {}: COPY [...] not JSON: {e}", instruction.line))
    } else {
        instruction
            .args
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    for word in words {
        let irrelevant =
            word.starts_with("--chown=") || word.starts_with("--chmod=") || word == "--link";
        if let Some(stage) = word.strip_prefix("--from=") {
            from = Some(stage.to_string());
        } else if irrelevant {
            continue;
        } else if word.starts_with("--") {
            panic!(
                "line {}: COPY {word} is not modelled by this test",
                instruction.line
            );
        } else {
            paths.push(word);
        }
    }
    let destination = paths
        .pop()
        .unwrap_or_else(|| panic!("line {}: COPY without paths", instruction.line));
    assert!(
        !paths.is_empty(),
        "line {}: COPY without a source",
        instruction.line
    );
    Copy {
        from,
        sources: paths,
        destination,
    }
}

/// The cargo command of a `RUN` line: the words of the first command of the line (split at
/// `&&`, `||`, `;` and `|`) that is `cargo build`.
fn cargo_build_command(run: &str) -> Option<Vec<String>> {
    run.split("&&")
        .flat_map(|part| part.split("||"))
        .flat_map(|part| part.split([';', '|']))
        .map(|command| {
            command
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|words| words.len() >= 2 && words[0] == "cargo" && words[1] == "build")
}

/// The value of `--name VALUE` or `--name=VALUE` in a command's words.
fn flag_value<'a>(words: &'a [String], name: &str) -> Option<&'a str> {
    words.iter().enumerate().find_map(|(i, word)| {
        if word == name {
            words.get(i + 1).map(String::as_str)
        } else {
            word.strip_prefix(name)?.strip_prefix('=')
        }
    })
}

/// What the tests need from the Dockerfile.
struct Image {
    /// The build stage's `WORKDIR` (absolute): where the context's files go and the cargo
    /// command runs.
    workdir: String,
    /// The build stage's `COPY` lines from the build context.
    context_copies: Vec<Copy>,
    /// The build stage's `RUN` line that runs `cargo build`, verbatim.
    build_run: String,
    /// That line's cargo command, in words.
    cargo: Vec<String>,
    /// The final stage's `COPY --from=<build stage>`: the built binary into the image.
    binary_copy: Copy,
    final_stage: Stage,
    /// `ARG RUST_VERSION=...` of the build stage.
    rust_version: Option<String>,
}

fn image() -> Image {
    let path = mcs::repo().join("Dockerfile");
    let text = std::fs::read_to_string(&path).expect("the Dockerfile");
    let mut stages = parse_dockerfile(&text);
    let final_stage = stages.pop().expect("a FROM in the Dockerfile");
    // The build stage is the one the final stage copies from.
    let binary_copy = final_stage
        .all("COPY")
        .map(parse_copy)
        .find(|copy| copy.from.is_some())
        .expect("the final stage copies the binary from a build stage (COPY --from=...)");
    let build_name = binary_copy.from.clone();
    let build = stages
        .iter()
        .find(|stage| stage.name == build_name)
        .unwrap_or_else(|| panic!("no stage named {build_name:?}"));

    // One absolute WORKDIR, so that every COPY and RUN of the stage is relative to it.
    let workdirs: Vec<&Instruction> = build.all("WORKDIR").collect();
    assert!(
        workdirs.len() == 1 && workdirs[0].args.starts_with('/'),
        "the build stage should have one absolute WORKDIR (others are not modelled): {workdirs:?}"
    );
    let workdir = workdirs[0].args.trim_end_matches('/').to_string();
    let context_copies: Vec<Copy> = build.all("COPY").map(parse_copy).collect();
    assert!(
        context_copies.iter().all(|copy| copy.from.is_none()),
        "the build stage copies from another stage: not modelled"
    );
    let build_run = build
        .all("RUN")
        .find(|run| cargo_build_command(&run.args).is_some())
        .expect("a RUN line with `cargo build` in the build stage")
        .args
        .clone();
    assert!(
        !build_run.starts_with('['),
        "an exec-form RUN is not modelled"
    );
    let cargo = cargo_build_command(&build_run).unwrap();
    let rust_version = build
        .all("ARG")
        .find_map(|arg| arg.args.strip_prefix("RUST_VERSION="))
        .map(str::to_string);
    Image {
        workdir,
        context_copies,
        build_run,
        cargo,
        binary_copy,
        final_stage,
        rust_version,
    }
}

impl Image {
    /// Where the cargo command puts the binary, relative to `WORKDIR` (the default target
    /// directory, the profile's directory, the `--bin` name).
    fn built_binary(&self) -> String {
        let bin = flag_value(&self.cargo, "--bin").expect("the cargo command names its --bin");
        let profile = match flag_value(&self.cargo, "--profile") {
            Some("dev") => "debug",
            Some(profile) => profile,
            None if self.cargo.iter().any(|w| w == "--release") => "release",
            None => "debug",
        };
        assert!(
            flag_value(&self.cargo, "--target").is_none(),
            "--target is not modelled"
        );
        format!("target/{profile}/{bin}")
    }

    /// Where the final stage puts the binary.
    fn installed_binary(&self) -> String {
        let copy = &self.binary_copy;
        assert_eq!(copy.sources.len(), 1, "{copy:?}");
        match copy.destination.strip_suffix('/') {
            Some(dir) => format!("{dir}/{}", file_name(&copy.sources[0])),
            None => copy.destination.clone(),
        }
    }

    /// The exec-form `ENTRYPOINT` of the final stage.
    fn entrypoint(&self) -> Vec<String> {
        let entrypoint = self.final_stage.last("ENTRYPOINT");
        serde_json::from_str(&entrypoint.args).unwrap_or_else(|e| {
            panic!(
                "line {}: ENTRYPOINT in exec form (a JSON array) expected, so that the \
                 server is PID 1 and gets SIGTERM: {e}",
                entrypoint.line
            )
        })
    }
}

fn file_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap()
}

#[test]
fn the_parser_joins_continued_lines_drops_comments_and_splits_stages() {
    let stages = parse_dockerfile(
        "# top\nFROM base AS build\nRUN a \\\n# inside\n    && cargo build --release --bin x \\\n    && ldd x\nCOPY a b ./\n\nFROM small\nCOPY --from=build /w/target/release/x /usr/bin/\n",
    );
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0].name.as_deref(), Some("build"));
    let run = stages[0].last("RUN");
    assert_eq!(
        cargo_build_command(&run.args).unwrap(),
        ["cargo", "build", "--release", "--bin", "x"]
    );
    assert_eq!(run.line, 3);
    assert_eq!(
        parse_copy(stages[0].last("COPY")),
        Copy {
            from: None,
            sources: vec!["a".into(), "b".into()],
            destination: "./".into()
        }
    );
    assert_eq!(
        parse_copy(stages[1].last("COPY")).from.as_deref(),
        Some("build")
    );
}

// ---------------------------------------------------------------------------------------------
// What can be checked without building
// ---------------------------------------------------------------------------------------------

/// The final stage installs the file the build stage's cargo command produced, runs it as its
/// entrypoint, and not as root.
#[test]
fn the_final_stage_runs_the_built_binary_as_a_non_root_user() {
    let image = image();
    assert_eq!(
        image.binary_copy.sources,
        [format!("{}/{}", image.workdir, image.built_binary())],
        "the final stage copies another file than the one `{}` builds",
        image.cargo.join(" ")
    );
    let entrypoint = image.entrypoint();
    assert_eq!(
        entrypoint.first(),
        Some(&image.installed_binary()),
        "the entrypoint is not the installed binary"
    );
    let user = image.final_stage.last("USER").args.clone();
    let name = user.split(':').next().unwrap_or_default();
    assert!(
        !name.is_empty() && name != "0" && name != "root",
        "the image runs as root: USER {user}"
    );
    // The binary is the crate's, under its own name.
    let bin = file_name(&image.built_binary()).to_string();
    assert!(
        cargo_bins().contains(&bin),
        "--bin {bin} names no [[bin]] of Cargo.toml"
    );
}

/// The `[[bin]]` names of Cargo.toml (the `name = "..."` lines of its `[[bin]]` tables).
fn cargo_bins() -> Vec<String> {
    let text = std::fs::read_to_string(mcs::repo().join("Cargo.toml")).unwrap();
    let mut bins = Vec::new();
    let mut in_bin = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if let Some(name) = line.strip_prefix("name = ").filter(|_| in_bin) {
            bins.push(name.trim_matches('"').to_string());
        }
    }
    bins
}

/// The image exposes exactly the ports the DaemonSet's container declares, which are the ports
/// the server listens on with the DaemonSet's arguments (the image's entrypoint parses them:
/// the DaemonSet sets `args`, not `command`).
#[test]
fn the_image_exposes_the_ports_the_daemonset_uses() {
    let image = image();
    let exposed: BTreeSet<u16> = image
        .final_stage
        .all("EXPOSE")
        .flat_map(|expose| expose.args.split_whitespace())
        .map(|port| {
            let port = port.strip_suffix("/tcp").unwrap_or(port);
            port.parse()
                .unwrap_or_else(|_| panic!("EXPOSE {port}: a TCP port number expected"))
        })
        .collect();

    let daemonset: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(mcs::repo().join("config/deploy/daemonset.yaml")).unwrap(),
    )
    .expect("config/deploy/daemonset.yaml");
    let container = daemonset["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("the DaemonSet's containers")
        .iter()
        .find(|c| c["name"].as_str() == Some("machine-config-server"))
        .expect("the DaemonSet's machine-config-server container");
    assert!(
        container.get("command").is_none(),
        "the DaemonSet replaces the image's entrypoint"
    );
    let mut declared = BTreeSet::new();
    for port in container["ports"].as_sequence().expect("its ports") {
        let container_port = port["containerPort"].as_u64().expect("containerPort") as u16;
        // Host network: the port the pod declares is the node's.
        assert_eq!(port["hostPort"].as_u64(), Some(container_port.into()));
        assert!(matches!(port["protocol"].as_str(), None | Some("TCP")));
        declared.insert(container_port);
    }

    let args: Vec<String> = container["args"]
        .as_sequence()
        .expect("its args")
        .iter()
        .map(|arg| arg.as_str().expect("string args").to_string())
        .collect();
    let command_line: Vec<String> = image.entrypoint().into_iter().chain(args).collect();
    let cli = Cli::try_parse_from(&command_line).unwrap_or_else(|e| {
        panic!("the entrypoint does not take the DaemonSet's arguments {command_line:?}: {e}")
    });
    let listening: BTreeSet<u16> = [cli.root.secure_port, cli.root.insecure_port]
        .into_iter()
        .filter(|port| *port != 0)
        .collect();

    assert_eq!(exposed, declared, "EXPOSE and the DaemonSet's ports differ");
    assert_eq!(
        declared, listening,
        "the DaemonSet declares other ports than the server listens on with its arguments"
    );
}

/// The Dockerfile's toolchain can build the crate (`rust-version` is the minimum).
#[test]
fn the_images_toolchain_is_at_least_the_crates_rust_version() {
    let image = image();
    let pinned = image
        .rust_version
        .expect("ARG RUST_VERSION=... in the build stage");
    let manifest = std::fs::read_to_string(mcs::repo().join("Cargo.toml")).unwrap();
    let minimum = manifest
        .lines()
        .find_map(|line| line.strip_prefix("rust-version = "))
        .expect("rust-version in Cargo.toml")
        .trim_matches('"');
    let version = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    assert!(
        version(&pinned) >= version(minimum),
        "RUST_VERSION {pinned} < rust-version {minimum}"
    );
}

// ---------------------------------------------------------------------------------------------
// The build, in exactly the image's context
// ---------------------------------------------------------------------------------------------

/// Copies `from` (a file, a directory or a symbolic link of the build context) to `to`, as
/// `COPY` does: a directory's contents into `to`, symbolic links as links. Files keep their
/// modification time, so that cargo finds an unchanged tree fresh.
fn copy_tree(from: &Path, to: &Path) {
    let meta = std::fs::symlink_metadata(from)
        .unwrap_or_else(|e| panic!("COPY source {}: {e}", from.display()));
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).unwrap();
        std::os::unix::fs::symlink(target, to).unwrap();
    } else if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::copy(from, to).unwrap();
        let copied = std::fs::File::options().write(true).open(to).unwrap();
        copied.set_modified(meta.modified().unwrap()).unwrap();
    }
}

/// Lays out what `copy` copies from the repository (the build context) under `workdir_dir`,
/// the directory standing for the stage's `WORKDIR`.
fn lay_out(repo: &Path, workdir: &str, workdir_dir: &Path, copy: &Copy) {
    assert!(
        copy.sources
            .iter()
            .all(|s| !s.contains(['*', '?', '[']) && !s.starts_with('/') && !s.contains("..")),
        "COPY sources with wildcards, absolute or climbing paths are not modelled: {copy:?}"
    );
    let destination = match copy.destination.strip_prefix('/') {
        Some(_) => {
            let inside = copy
                .destination
                .strip_prefix(workdir)
                .unwrap_or_else(|| panic!("COPY outside WORKDIR {workdir}: {copy:?}"));
            workdir_dir.join(inside.trim_start_matches('/'))
        }
        None => workdir_dir.join(&copy.destination),
    };
    let into_directory = copy.destination.ends_with('/') || copy.sources.len() > 1;
    for source in &copy.sources {
        let from = repo.join(source);
        let to = if from.is_dir() || !into_directory {
            destination.clone()
        } else {
            destination.join(file_name(source))
        };
        copy_tree(&from, &to);
    }
}

/// The last `lines` lines of a command's output, for a failure message.
fn tail(output: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(output);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Where the context is laid out: outside the checkout (module docs), at a path fixed for this
/// checkout so that cargo's fingerprints (which name the package's path) carry over between
/// runs.
fn context_dir(root: &Path) -> PathBuf {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    root.hash(&mut hasher);
    std::env::temp_dir().join(format!("mcs-image-context-{:016x}", hasher.finish()))
}

#[test]
fn the_image_builds_from_exactly_what_its_build_stage_copies() {
    let image = image();
    let repo = mcs::repo();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-context");
    let context = context_dir(&root);
    let target = root.join("target");

    // An empty directory standing for WORKDIR, with exactly what the COPY lines copy.
    if context.exists() {
        std::fs::remove_dir_all(&context).unwrap();
    }
    std::fs::create_dir_all(&context).unwrap();
    std::fs::create_dir_all(&target).unwrap();
    for copy in &image.context_copies {
        lay_out(&repo, &image.workdir, &context, copy);
    }
    assert!(
        !context.join("target").exists(),
        "the build stage copies a target directory"
    );
    std::os::unix::fs::symlink(&target, context.join("target")).unwrap();

    // Cargo reads `.cargo/config.toml` in every directory above the one it runs in; Docker's
    // build has none above WORKDIR, so none may be above this one either.
    // The context's own (what the Dockerfile copies into WORKDIR) is read by both.
    let configs: Vec<PathBuf> = context
        .ancestors()
        .skip(1)
        .flat_map(|dir| [dir.join(".cargo/config.toml"), dir.join(".cargo/config")])
        .filter(|config| config.exists())
        .filter(|config| {
            std::env::var_os("CARGO_HOME").is_none_or(|home| !config.starts_with(home))
        })
        .collect();
    assert!(
        configs.is_empty(),
        "cargo configuration above the context that the image's build would not read: {configs:?}"
    );

    // The RUN line, verbatim, as Docker's shell form runs it, in an environment without the
    // settings the image's build does not have (cargo's `CARGO_*` variables, among them the ones
    // cargo sets for this test and any profile override, and `RUSTFLAGS`), but two: offline
    // (the crates are already fetched), and the context's default target directory named, so
    // that nothing else on this machine moves it.
    let mut command = Command::new("sh");
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if (name.starts_with("CARGO_") && name != "CARGO_HOME")
            || ["RUSTFLAGS", "RUSTDOCFLAGS"].contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    let started = Instant::now();
    let output = command
        .arg("-c")
        .arg(&image.build_run)
        .current_dir(&context)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TARGET_DIR", context.join("target"))
        .output()
        .expect("sh");
    let rustc = Command::new("rustc")
        .arg("--version")
        .current_dir(&context)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let hint = if stderr.contains("--offline was specified") {
        "\n(the crates of the image's build are not all fetched: `cargo fetch --locked`, which \
         .ci/run runs before the tests; this test never uses the network)"
    } else {
        ""
    };
    assert!(
        output.status.success(),
        "the image's build fails in exactly its context ({}):\nRUN {}\n{}\n{}{hint}",
        output.status,
        image.build_run,
        tail(&output.stdout, 20),
        tail(&output.stderr, 60)
    );
    println!(
        "built in the image's context in {:.0?} ({rustc}; the Dockerfile pins {})",
        started.elapsed(),
        image.rust_version.as_deref().unwrap_or("no version")
    );

    // The binary the final stage copies: dynamically linked against the platform's OpenSSL.
    let binary = context.join(image.built_binary());
    let facts =
        elf::read(&std::fs::read(&binary).unwrap_or_else(|e| panic!("{}: {e}", binary.display())));
    assert!(facts.is_executable(), "{facts:?}");
    assert!(facts.has_interpreter, "statically linked: {facts:?}");
    assert!(
        facts.needed.iter().any(|lib| lib == "libcrypto.so.3"),
        "the image's binary does not link libcrypto.so.3: {facts:?}"
    );
}
