"""Zero-code profiling in two processes: parent/ (`perfcore run`: launch, run folder, finish) and child/
(inside the user's interpreter: boot, hooks feeding the recording, the part it writes). What crosses
between them is defined in protocol; options holds the checks both sides make of their settings."""
