import sys

if len(sys.argv) > 1 and sys.argv[1] == "--as-python":  # engine.relaunch.AS_PYTHON: a bundle standing in for python
    from engine.relaunch import run_as_python

    sys.exit(run_as_python(sys.argv[2:]))

from app.main import main

sys.exit(main())
