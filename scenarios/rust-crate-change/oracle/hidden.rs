use slugger::slugify;

#[test]
fn hidden_collapses_runs() {
    assert_eq!(slugify("Rust -- 2024 Edition"), "rust-2024-edition");
}

#[test]
fn hidden_trims_both_ends() {
    assert_eq!(slugify("--Hi--"), "hi");
    assert_eq!(slugify("!!!"), "");
}
