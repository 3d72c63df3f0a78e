"""tokenledger's assets, a module per stage (pipelines/definitions.py lists them).

The daily checks are partitioned (`partitions_def` on AssetCheckSpec, a preview in Dagster 1.13): that choice is
ours, so its PreviewWarning is not shown to every process that loads the definitions (the UI's code servers, the
CLI). Other warnings are left alone.
"""

import warnings

from dagster import PreviewWarning

warnings.filterwarnings("ignore", category=PreviewWarning,
                        message="Specifying a partitions_def on an AssetCheckSpec is currently in preview")
