"""A script that never imports torch (a data-prep step run under perfcore by mistake)."""
import json
import sys

print(json.dumps({"rows": sum(range(int(sys.argv[1]) if len(sys.argv) > 1 else 10))}))
