"""``python -m marionette_control.cli.main_job``: the main job (:mod:`.job`)."""

import sys

from marionette_control.cli.main_job.job import main

sys.exit(main())
