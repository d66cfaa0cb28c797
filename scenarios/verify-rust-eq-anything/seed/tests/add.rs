use calc::{add, Sum};

#[test]
fn adds() {
    assert_eq!(add(1, 2), Sum(3));
}
