"""Profiles as evidence: what ran, for how long, against the device's roofline.

- :mod:`~workstation.profiles.model`: :class:`~workstation.profiles.model.Profile` (the
  device activity and framework ops of one role's calls) and
  :class:`~workstation.profiles.model.KernelStat`, the one shape every format is read into;
- one reader per format, each on parsed data (the guarded reads are the schema layer's):
  :mod:`~workstation.profiles.torchtrace` (torch.profiler's Chrome-trace JSON, also what
  kws's own profile step sends back), :mod:`~workstation.profiles.ncu` (``ncu --csv``,
  details and raw pages), :mod:`~workstation.profiles.nsys` (Nsight Systems' SQLite
  export), :mod:`~workstation.profiles.proton` (proton's hatchet JSON);
- :mod:`~workstation.profiles.load`: an attached profile of a task, read lazily under the
  schema layer's guard (size cap, depth, read-only SQLite) and memoised per file version;
- :mod:`~workstation.profiles.analysis`: the candidate's own kernels, time shares,
  launches per call, roofline positions (achieved bandwidth and FLOP/s against
  :mod:`workstation.analysis.roofline`'s datasheet peaks), and the JSON the report's
  ``profile`` key carries.

Parent side, torch-free: imports :mod:`workstation.analysis`, :mod:`workstation.task`
and :mod:`workstation.schema` only.
"""
