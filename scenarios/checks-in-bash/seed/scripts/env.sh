export PYTHONPATH=src
