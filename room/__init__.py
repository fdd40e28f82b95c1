"""A room: several app processes behind HAProxy, each browser kept on the process that holds its session.

    python -m room [--replicas N] [--port 8080] [--served]      (what `make room` does)

A Streamlit session lives in the process that opened it (its steps, branches and KV cache), and the GIL lets
one process use about one core for building pages: a class past ten students needs several processes and a
proxy that sends each browser back to its own one. room.config renders HAProxy's file from the template
beside it; room.launch starts the processes and the proxy, restarts a process that dies, and stops them all.
"""
