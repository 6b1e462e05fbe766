#!/bin/bash
# Session 23 call C (x4), after the heater fix: call B's runs (tools/run23b.sh) again, with
# shorter limits for the phased tune and bench-workers to fit the device time left.
NAME=c PHASED_S=150 BW_S=230 BW_MIN=3.6 exec bash "$(dirname "$0")/run23b.sh"
