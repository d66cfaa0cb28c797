use slug::{slugify, slugify_max};

#[test]
fn slugify_max_keeps_whole_words() {
    assert_eq!(slugify_max("Hello, wide World!", 100), "hello-wide-world");
    assert_eq!(slugify_max("Hello, wide World!", 16), "hello-wide-world");
    assert_eq!(slugify_max("Hello, wide World!", 15), "hello-wide");
    assert_eq!(slugify_max("Hello, wide World!", 11), "hello-wide");
    assert_eq!(slugify_max("Hello, wide World!", 6), "hello");
    assert_eq!(slugify_max("Hello, wide World!", 3), "hel");
    assert_eq!(slugify_max("Ünïcödé title", 7), "unicode");
}

#[test]
fn slugify_is_unchanged() {
    assert_eq!(slugify("My Test String!!!1!1"), "my-test-string-1-1");
}
