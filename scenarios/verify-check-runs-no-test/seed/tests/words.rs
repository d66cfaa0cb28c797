use wordstat::word_count;

#[test]
fn empty_text_has_no_words() {
    assert_eq!(word_count(""), 0);
}

#[test]
fn runs_of_spaces_separate_once() {
    assert_eq!(word_count("  one   two\tthree\n"), 3);
}
