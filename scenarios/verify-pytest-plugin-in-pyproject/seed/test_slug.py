from slug import slug

def test_words():
    assert slug('Hello World') == 'hello-world'
