from slug import slug

def test_slug():
    assert slug('A B') == 'a-b'
