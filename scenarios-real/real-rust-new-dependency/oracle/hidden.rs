#[test]
fn to_base64_of_known_digests() {
    assert_eq!(md5::compute(b"abc").to_base64(), "kAFQmDzST7DWlj99KOF/cg==");
    assert_eq!(md5::compute(b"").to_base64(), "1B2M2Y8AsgTpgAmY7PhCfg==");
    assert_eq!(
        md5::compute(b"The quick brown fox jumps over the lazy dog").to_base64(),
        "nhB9nTcrtoJr2B01QqQZ1g=="
    );
}
