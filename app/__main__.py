import sys

from engine.relaunch import AS_PYTHON, run_as_python

if len(sys.argv) > 1 and sys.argv[1] == AS_PYTHON:  # a bundle standing in for its Python interpreter
    sys.exit(run_as_python(sys.argv[2:]))

from app.main import main

sys.exit(main())
