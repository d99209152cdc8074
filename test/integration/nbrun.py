"""Validates a notebook against nbformat 4's schema and runs it in a plain
Python kernel (nbclient) with PSM_ROOT set to a copy of the project.
usage: nbrun.py NOTEBOOK ROOT_COPY  -> JSON on stdout:
{"valid": true, "cells": [{"id", "cell", "stdout", "result", "ename"}]}"""
import json
import os
import sys

import nbformat
from nbclient import NotebookClient


def outs(cell):
    o = {"stdout": "", "result": None, "ename": None}
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream" and out["name"] == "stdout":
            o["stdout"] += out["text"]
        elif out["output_type"] == "execute_result":
            o["result"] = out["data"].get("text/plain")
        elif out["output_type"] == "error":
            o["ename"] = out["ename"]
    return o


def main():
    path, root = sys.argv[1], sys.argv[2]
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    os.environ["PSM_ROOT"] = root
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": root}})
    client.execute()
    cells = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        d = {"id": c.get("id"), "cell": c.metadata.get("psm", {}).get("cell")}
        d.update(outs(c))
        cells.append(d)
    json.dump({"valid": True, "cells": cells}, sys.stdout)


main()
