"""Local servers on 127.0.0.1 that answer as the public infini-gram services do, quirks
included (each module names the documentation or server code it follows), in front of or
beside a real `audit serve`: for the tests and for the benchmarks in bench/."""
