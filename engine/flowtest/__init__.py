"""Flow tests recorded from real runs: `<flow>.<name>.flowtest.json` files and their in-process replay."""
