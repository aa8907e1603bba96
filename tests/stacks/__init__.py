"""The examples' real stacks (examples/stacks/): each case's service built the way teams build it, on
PostgreSQL, Redis, worker processes and a task queue, driven through every entry point. The tier starts
databases and processes; a component that cannot start fails the test, saying which and why."""
