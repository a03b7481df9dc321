//! The checked-in fixtures (`tests/fixtures/generated/`) are exactly what their generator
//! writes: regenerating must not change a byte, so a hand edit or a generator change that was
//! not re-run is caught here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable fixture directory") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("below root").to_path_buf();
                out.insert(relative, std::fs::read(&path).expect("readable fixture"));
            }
        }
    }
    out
}

#[test]
fn checked_in_fixtures_equal_the_generator_output() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("tempdir");
    let target = out.path().join("generated");
    let status = Command::new("python3")
        .arg(repo.join("tests/fixtures/generate.py"))
        .arg(&target)
        .status()
        .expect("python3 runs the fixture generator");
    assert!(status.success(), "the generator failed");
    let fresh = files(&target);
    let checked_in = files(&repo.join("tests/fixtures/generated"));
    let names = |m: &BTreeMap<PathBuf, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&fresh), names(&checked_in), "the same files");
    for (path, bytes) in &fresh {
        assert!(
            checked_in[path] == *bytes,
            "{} differs from the generator's output: run `python3 tests/fixtures/generate.py`",
            path.display()
        );
    }
}
