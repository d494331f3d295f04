//! The snippets of the README and the guide (`docs/*.md`) are regions of examples that CI
//! builds and runs (the FoundationDB ones on a real cluster, the README's quick start stopped
//! with Ctrl-C by scripts/doc-blocks): each code block after a `<!-- snippet: FILE#NAME -->`
//! marker must be exactly the lines of
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

/// The README and every page of the guide.
fn pages(root: &Path) -> Vec<(String, String)> {
    let mut pages = vec!["README.md".to_owned()];
    let mut guide: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    guide.sort();
    pages.extend(guide);
    pages
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(root.join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

#[test]
fn every_marked_snippet_is_the_region_of_its_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut blocks = Vec::new();
    for (page, text) in pages(root) {
        let marked = marked_blocks(&text);
        if page == "README.md" {
            assert!(
                marked
                    .iter()
                    .any(|(file, ..)| file == "examples/hello_runner.rs"),
                "the README's quick start is the region of examples/hello_runner.rs"
            );
        }
        blocks.extend(marked);
    }
    assert!(
        blocks.len() >= 5,
        "the quick start and the FoundationDB snippets are marked ({} found)",
        blocks.len()
    );
    // The rolling-upgrade page's snippets are regions of its examples too.
    let upgrades = std::fs::read_to_string(root.join("docs/rolling-upgrades.md")).unwrap();
    assert!(
        !marked_blocks(&upgrades).is_empty(),
        "docs/rolling-upgrades.md marks its snippets"
    );
    for (file, name, block) in blocks {
        let source = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("snippet source {file}: {e}"));
        let expected = region(&source, &name)
            .unwrap_or_else(|| panic!("{file} has no region `// README: {name}`"));
        assert_eq!(
            block, expected,
            "the snippet {file}#{name} differs from the example's region"
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

#[test]
fn every_relative_link_of_the_readme_and_the_guide_names_a_file_of_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    for (page, text) in pages(root) {
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(rest.len())];
            if target.starts_with("http") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let file = target.split('#').next().unwrap_or(target);
            if !root.join(dir).join(file).exists() {
                broken.push(format!("{page}: {target}"));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
}

#[test]
fn no_page_or_source_cites_a_design_document_users_do_not_have() {
    // The design is docs/design.md, in the package; the old citations named a file that is not.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut citing = Vec::new();
    let mut stack = vec![root.join("src"), root.join("examples"), root.join("tests")];
    let mut files: Vec<std::path::PathBuf> =
        pages(root).into_iter().map(|(p, _)| root.join(p)).collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
                files.push(path);
            }
        }
    }
    let needle = ["DESIGN", " §"].concat();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains(&needle) {
            citing.push(file.display().to_string());
        }
    }
    assert!(citing.is_empty(), "cite {needle}N: {citing:#?}");
}
