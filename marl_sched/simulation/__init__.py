"""The pieces of the discrete-event simulator, one idea a module.

:class:`marl_sched.simulator.Simulator` is put together from them; import it (and
the records, views and errors) from :mod:`marl_sched.simulator`.

- :mod:`.records`: the simulator's records and errors (running jobs, job outcomes,
  statistics).
- :mod:`.events`: the event engine (clock, heap, handlers) and exact progress
  integration.
- :mod:`.accounting`: cluster state and capacity accounting (GPUs, cores, memory,
  pressures, exposure, link loads, GPU sharing), placing and removing jobs.
- :mod:`.queueing`: the queue, its ordering and the incremental scan that offers
  decisions.
- :mod:`.moves`: moving running jobs: migration and preemption.
- :mod:`.fork`: what-if support: copying the state, splicing the future arrivals.
- :mod:`.view`: the read-only views policies and load controllers get.
"""
