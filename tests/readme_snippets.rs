//! The README's FoundationDB snippets are regions of examples that CI runs on a real cluster:
//! each code block after a `<!-- snippet: FILE#NAME -->` marker must be exactly the lines of
//! `FILE` between `// README: NAME` and `// README: end` (`#` for Python), less their common
//! indentation.
//! A snippet edited in one place only fails here. The same holds for the pages of `docs/` listed
//! below.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

/// Whether `line` is the marker `// README: what` (Rust) or `# README: what` (Python).
fn is_marker(line: &str, what: &str) -> bool {
    let line = line.trim();
    [format!("// README: {what}"), format!("# README: {what}")]
        .iter()
        .any(|m| line == m)
}

/// The lines of `text` between the markers `README: name` and `README: end`, dedented.
fn region(text: &str, name: &str) -> Option<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !is_marker(l, name));
    lines.next()?;
    let body: Vec<&str> = lines.take_while(|l| !is_marker(l, "end")).collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len().saturating_sub(l.trim_start().len()))
        .min()
        .unwrap_or(0);
    Some(
        body.iter()
            .map(|l| l.get(indent..).unwrap_or("").trim_end().to_owned())
            .collect(),
    )
}

/// Every `(file, name, block lines)` the README marks as a snippet.
fn marked_blocks(readme: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("<!-- snippet: ") else {
            continue;
        };
        let target = rest.trim_end_matches("-->").trim();
        let (file, name) = target.split_once('#').expect("snippet marker FILE#NAME");
        let fence = lines.next().expect("a code block after the marker");
        assert!(
            fence.starts_with("```"),
            "marker {target} not followed by a code block"
        );
        let block: Vec<String> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .map(|l| l.trim_end().to_owned())
            .collect();
        out.push((file.to_owned(), name.to_owned(), block));
    }
    out
}

#[test]
fn every_marked_readme_snippet_is_the_region_of_its_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = marked_blocks(&readme);
    assert!(
        blocks.len() >= 4,
        "the README's FoundationDB snippets are marked ({} found)",
        blocks.len()
    );
    // The pages under docs/ that mark snippets the same way.
    let pages = ["docs/rolling-upgrades.md"];
    let blocks = blocks.into_iter().chain(pages.iter().flat_map(|page| {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        let marked = marked_blocks(&text);
        assert!(!marked.is_empty(), "{page} marks its snippets");
        marked
    }));
    for (file, name, block) in blocks {
        let source = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("snippet source {file}: {e}"));
        let expected = region(&source, &name)
            .unwrap_or_else(|| panic!("{file} has no region `// README: {name}`"));
        assert_eq!(
            block, expected,
            "README snippet {file}#{name} differs from the example's region"
        );
    }
}

#[test]
fn a_region_is_dedented_and_ends_at_its_end_marker() {
    let text = "fn x() {\n    // README: a\n    let y = 1;\n        z();\n    // README: end\n}\n";
    assert_eq!(
        region(text, "a"),
        Some(vec!["let y = 1;".to_owned(), "    z();".to_owned()])
    );
    assert_eq!(region(text, "b"), None);
}
