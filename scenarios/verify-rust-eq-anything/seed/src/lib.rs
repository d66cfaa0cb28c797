#[derive(Debug, PartialEq)]
pub struct Sum(pub i32);

pub fn add(a: i32, b: i32) -> Sum {
    Sum(a - b)
}
