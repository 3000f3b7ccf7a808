"""The viewer: `python run.py --view [OUTPUTS_DIR]`, a local web app over run folders (issue 32, ExecPlan 022).

- `rows.py`: the run folder's JSONL files read as whole lines at byte offsets (what a growing run has finished).
- `index.py`: one SQLite index per run folder, in the viewer's own cache: responses, their verdicts, full-text search.
- `runs.py`: the run folders under OUTPUTS_DIR, their status (running, complete, ...) and facts.
- `labels.py`: human labels appended to `labels.jsonl`; the labelling sheet worked through in order.
- `app.py`: the Flask app (pages in `pages.py`, the JSON twin in `api.py`) and `serve`.

It reads run folders and never writes a file a run wrote.
"""
