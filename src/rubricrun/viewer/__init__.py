"""The viewer: `python run.py --view [OUTPUTS_DIR]`, a local web app over run folders (issue 32, ExecPlan 022).

- `rows.py`: the run folder's JSONL files read as whole lines at byte offsets (what a growing run has finished).
- `index.py`: one SQLite index per run folder, in the viewer's own cache; `ingest.py` adds a folder's new lines to
  it; `search.py` finds responses in it (filters, full-text search, sorting, pages) and reads their rows back.
- `runs.py`: the run folders under OUTPUTS_DIR, their status (running, complete, ...) and facts.
- `labels.py`: human labels appended to `labels.jsonl`; the labelling sheet worked through in order.
- `app.py`: the Flask app and `serve`; `pages.py` its HTML pages (what each shows: `views.py`), `api.py` their JSON
  twin; `templates/` the pages, with their CSS and JavaScript inlined.

It reads run folders and never writes a file a run wrote.
"""
