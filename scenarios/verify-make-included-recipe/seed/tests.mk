TEST_CMD = python3 -m unittest -v test_calc
