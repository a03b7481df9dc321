//! Every relative link of the repository's Markdown (README.md, docs/, benches/README.md and
//! any other `.md` file outside `target/`) resolves: the file or directory it names exists in
//! the repository, and a `#fragment` names a heading of the target file, by GitHub's rules
//! (the heading's text, lower-cased, punctuation dropped, spaces as `-`, `-1`, `-2` ... for
//! repeats), or an explicit `<a id>`/`<a name>`; in a file that is not Markdown, only GitHub's
//! line anchors (`#L10`, `#L10-L20`). Pure: reads files, nothing else.
//!
//! Not modelled: setext headings (underlined with `===`/`---`) and `_emphasis_` in heading text
//! (both unused here); a link to such a heading fails instead of passing wrongly.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

/// The Markdown text of a file outside fenced code blocks, as blocks (runs of non-blank lines),
/// so that code spans broken across lines are read whole. Each block comes with its first
/// line number.
fn blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match fence {
            Some((m, len)) => {
                if marker == Some(m) && run >= len && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                continue;
            }
            None if indent <= 3 && run >= 3 => {
                blocks.extend(current.take());
                fence = Some((marker.unwrap(), run));
                continue;
            }
            None => {}
        }
        if line.trim().is_empty() {
            blocks.extend(current.take());
        } else {
            let block = current.get_or_insert_with(|| (index + 1, String::new()));
            block.1.push_str(line);
            block.1.push('\n');
        }
    }
    blocks.extend(current);
    blocks
}

/// `text` with every code span's content replaced: by its line breaks only (`keep` false, to
/// look for links outside code) or by the content itself without its backticks (`keep` true, a
/// heading's rendered text). A backtick run with no closing run of the same length is text.
fn code_spans(text: &str, keep: bool) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|c| **c == '`').count();
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                let content: String = chars[i + run..end].iter().collect();
                if keep {
                    out.push_str(content.trim());
                } else {
                    // Line breaks stay, so that positions keep their line numbers.
                    out.extend(content.chars().filter(|c| *c == '\n'));
                }
                i = end + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The destinations of the inline links and images (`[text](dest "title")`), reference
/// definitions (`[ref]: dest`) and HTML `href`/`src` attributes of a block with its code
/// spans removed, each with the line (0-based, within the block) it is on.
fn destinations(block: &str) -> Vec<(usize, String)> {
    let line_of = |rest: &str| block[..block.len() - rest.len()].matches('\n').count();
    let mut found = Vec::new();
    let mut rest = block;
    while let Some(at) = rest.find("](") {
        let line = line_of(&rest[at..]);
        let after = &rest[at + 2..];
        let after = after.trim_start();
        let destination = if let Some(inside) = after.strip_prefix('<') {
            inside.split('>').next().unwrap_or_default().to_string()
        } else {
            let mut depth = 0usize;
            let mut end = after.len();
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    c if c.is_whitespace() => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            after[..end].to_string()
        };
        found.push((line, destination));
        rest = &rest[at + 2..];
    }
    for (index, line) in block.lines().enumerate() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') {
            if let Some((label, dest)) = trimmed[1..].split_once("]:") {
                if !label.is_empty() && !label.contains(']') {
                    if let Some(dest) = dest.split_whitespace().next() {
                        found.push((index, dest.trim_matches(['<', '>']).to_string()));
                    }
                }
            }
        }
    }
    for attribute in ["href=\"", "src=\""] {
        let mut rest = block;
        while let Some(at) = rest.find(attribute) {
            let value = &rest[at + attribute.len()..];
            let line = line_of(value);
            found.push((
                line,
                value.split('"').next().unwrap_or_default().to_string(),
            ));
            rest = value;
        }
    }
    found.sort_by_key(|(line, _)| *line);
    found
}

/// GitHub's anchor of a heading's rendered text (github-slugger): lower case; letters,
/// numbers, `-` and `_` kept; each space a `-`; everything else dropped.
fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// A heading's text as GitHub renders it: code spans as their content, links and images as
/// their text, HTML tags and `*` emphasis removed.
fn rendered(heading: &str) -> String {
    // Links first (their text may hold code), on the text with code spans kept verbatim.
    let mut out = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|c| open + c) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|e| close + e) else {
            break;
        };
        out.push_str(rest[..open].trim_end_matches('!'));
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    let text = code_spans(&out, true);
    let mut plain = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            '*' => {}
            c if !in_tag => plain.push(c),
            _ => {}
        }
    }
    plain.trim().to_string()
}

/// The anchors of a Markdown file: its ATX headings' slugs (repeats numbered) and explicit
/// `id`/`name` attributes.
fn anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (_, block) in blocks(text) {
        for line in block.lines() {
            let trimmed = line.trim_start();
            if line.len() - trimmed.len() > 3 {
                continue;
            }
            let level = trimmed.chars().take_while(|c| *c == '#').count();
            let after = &trimmed[level..];
            if (1..=6).contains(&level) && (after.is_empty() || after.starts_with([' ', '\t'])) {
                // An optional closing sequence of `#`s after a space.
                let mut heading = after.trim();
                let stripped = heading.trim_end_matches('#');
                if stripped.is_empty() || stripped.ends_with([' ', '\t']) {
                    heading = stripped.trim_end();
                }
                let base = slug(&rendered(heading));
                let mut candidate = base.clone();
                while let Some(count) = seen.get(&candidate).copied() {
                    let next = count + 1;
                    seen.insert(candidate.clone(), next);
                    candidate = format!("{base}-{next}");
                }
                seen.insert(candidate.clone(), 0);
                anchors.push(candidate);
            }
        }
        for attribute in ["id=\"", "name=\""] {
            let mut rest = block.as_str();
            while let Some(at) = rest.find(attribute) {
                let value = &rest[at + attribute.len()..];
                anchors.push(value.split('"').next().unwrap_or_default().to_string());
                rest = value;
            }
        }
    }
    anchors
}

/// `%XX` escapes decoded (links to paths with spaces or non-ASCII names).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A path with `.` and `..` resolved lexically; `None` when it climbs above its root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// What the checker reads of the repository: a file's text, or whether a path exists.
trait Tree {
    fn text(&self, path: &Path) -> Option<String>;
    fn exists(&self, path: &Path) -> bool;
}

/// The problems of the relative links of one Markdown file (`file`, relative to the
/// repository root), one line each.
fn broken_links(tree: &impl Tree, file: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut anchor_cache: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for (first_line, block) in blocks(text) {
        for (line, destination) in destinations(&code_spans(&block, false)) {
            let line = first_line + line;
            let is_external = destination.starts_with("//")
                || destination.split_once(':').is_some_and(|(scheme, _)| {
                    !scheme.is_empty()
                        && scheme
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
                });
            if destination.is_empty() || is_external {
                continue;
            }
            let (path, fragment) = match destination.split_once('#') {
                Some((path, fragment)) => (path, Some(percent_decode(fragment))),
                None => (destination.as_str(), None),
            };
            let path = percent_decode(path);
            let joined = if path.is_empty() {
                file.to_path_buf()
            } else if let Some(from_root) = path.strip_prefix('/') {
                PathBuf::from(from_root)
            } else {
                file.parent().unwrap_or(Path::new("")).join(&path)
            };
            let here = format!("{}:{line}: ({destination})", file.display());
            let Some(target) = normalize(&joined) else {
                problems.push(format!("{here} leaves the repository"));
                continue;
            };
            if !tree.exists(&target) {
                problems.push(format!(
                    "{here} names {}, which does not exist",
                    target.display()
                ));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target.extension().is_some_and(|e| e == "md") {
                let anchors = anchor_cache
                    .entry(target.clone())
                    .or_insert_with(|| anchors(&tree.text(&target).unwrap_or_default()));
                if !anchors.contains(&fragment) {
                    problems.push(format!(
                        "{here}: {} has no heading with the anchor #{fragment}",
                        target.display()
                    ));
                }
            } else {
                let line_anchor = |part: &str| {
                    part.strip_prefix('L')
                        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
                };
                let valid = match fragment.split_once('-') {
                    Some((from, to)) => line_anchor(from) && line_anchor(to),
                    None => line_anchor(&fragment),
                };
                if !valid {
                    problems.push(format!(
                        "{here}: #{fragment} in {}, which is not Markdown (only #L<n> anchors)",
                        target.display()
                    ));
                }
            }
        }
    }
    problems
}

/// The repository on disk.
struct Repo(PathBuf);

impl Tree for Repo {
    fn text(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(self.0.join(path)).ok()
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.join(path).exists()
    }
}

/// Every `.md` file under `dir` (relative to `root`), skipping `target` and hidden directories.
fn markdown_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        let kind = entry.file_type().unwrap();
        if kind.is_dir() && name != "target" && !name.starts_with('.') {
            markdown_files(root, &path, out);
        } else if kind.is_file() && name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_of_the_markdown_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    let mut files = Vec::new();
    markdown_files(&root, Path::new(""), &mut files);
    // The files the landing page and the docs are made of are among them.
    for expected in ["README.md", "benches/README.md"] {
        assert!(
            files.contains(&PathBuf::from(expected)),
            "{expected} missing"
        );
    }
    assert!(files.iter().any(|f| f.starts_with("docs")), "no docs/*.md");
    let repo = Repo(root);
    let mut problems = Vec::new();
    let mut links = 0;
    for file in &files {
        let text = repo.text(file).unwrap();
        links += blocks(&text)
            .iter()
            .map(|(_, block)| destinations(&code_spans(block, false)).len())
            .sum::<usize>();
        problems.extend(broken_links(&repo, file, &text));
    }
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
    println!("{} Markdown files, {links} links", files.len());
}

// ---------------------------------------------------------------------------------------------
// The checker itself
// ---------------------------------------------------------------------------------------------

/// A repository in memory.
struct Files(BTreeMap<PathBuf, String>);

impl Tree for Files {
    fn text(&self, path: &Path) -> Option<String> {
        self.0.get(path).cloned()
    }
    fn exists(&self, path: &Path) -> bool {
        self.0
            .keys()
            .any(|file| file == path || file.starts_with(path))
    }
}

#[test]
fn anchors_follow_githubs_slugs() {
    let text = "# Operations: endpoints and metrics\n\n## Soak (`benches/soak.sh`)\n\n\
                ```sh\n# not a heading\n```\n\n## Results\n## Results\n### `/status` ###\n\
                ## See [the docs](docs/x.md) <a id=\"here\"></a>\n";
    assert_eq!(
        anchors(text),
        [
            "operations-endpoints-and-metrics",
            "soak-benchessoaksh",
            "results",
            "results-1",
            "status",
            "see-the-docs",
            "here",
        ]
    );
    assert_eq!(slug("TLS crypto and FIPS"), "tls-crypto-and-fips");
    assert_eq!(
        slug("What it does, in this order"),
        "what-it-does-in-this-order"
    );
}

#[test]
fn a_missing_file_a_missing_anchor_and_a_link_out_of_the_repository_are_reported() {
    let files = Files(BTreeMap::from([
        (
            PathBuf::from("README.md"),
            "# Title\n\nSee [ops](docs/ops.md#logs), [gone](docs/gone.md), \
             [bad](docs/ops.md#nope),\n[up](../outside.md), [self](#title), \
             `[code](not/a/link.md)`, [web](https://example.com/x.md#y),\n\
             [src](src/lib.rs#L3-L9), [src](src/lib.rs#layers).\n\n```\n[fenced](nope.md)\n```\n\n\
             [ref]: docs/none.md\n"
                .to_string(),
        ),
        (
            PathBuf::from("docs/ops.md"),
            "# Ops\n\n## Logs\n".to_string(),
        ),
        (PathBuf::from("src/lib.rs"), String::new()),
    ]));
    let problems = broken_links(
        &files,
        Path::new("README.md"),
        &files.0[Path::new("README.md")],
    );
    let expected = [
        "README.md:3: (docs/gone.md) names docs/gone.md, which does not exist",
        "README.md:3: (docs/ops.md#nope): docs/ops.md has no heading with the anchor #nope",
        "README.md:4: (../outside.md) leaves the repository",
        "README.md:5: (src/lib.rs#layers): #layers in src/lib.rs, which is not Markdown",
        "README.md:11: (docs/none.md) names docs/none.md, which does not exist",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, expected) in problems.iter().zip(expected) {
        assert!(problem.contains(expected), "{problem} lacks {expected}");
    }
}
