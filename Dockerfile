# The workbench for people who do not install Python. From a clone (no Python needed on the host):
#   docker build -t planning . && docker run --rm -p 8501:8501 -v planning-home:/data planning
# then open http://localhost:8501. Plans, jobs and template caches live in the volume (PLANNING_HOME=/data).
# For a team, with sign-in: mount a secrets.toml with an [auth] section at /app/.streamlit/secrets.toml, or anywhere
# and name it with -e STREAMLIT_SECRETS_FILES=...; docs/team.md has Keycloak and Google examples.
# Installs exactly uv.lock's runtime set (no dev, ray or skypilot extras); tests/test_dockerfile.py replays the
# install steps below in a fresh venv on every `make test`.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    UV_COMPILE_BYTECODE=1 \
    UV_NO_CACHE=1 \
    PLANNING_HOME=/data \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app

# uv itself: the version and hashes `make` uses, into the image's own Python (not the app's venv)
COPY tools/uv-requirements.txt tools/uv-requirements.txt
RUN python -m pip install --no-cache-dir --disable-pip-version-check --no-deps --require-hashes -r tools/uv-requirements.txt

# The locked runtime dependencies first (a layer that survives source edits), then the package, editable
# (planning reads data/ beside its source)
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-install-project
COPY . .
RUN uv sync --locked

RUN useradd --create-home --uid 1000 planner && mkdir -p /data && chown planner /data
USER planner
VOLUME ["/data"]
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://localhost:8501/_stcore/health', timeout=4)"
# sign-in settings from PLANNING_AUTH_* variables, when given, become Streamlit's secrets file (docs/team.md)
ENTRYPOINT ["python", "tools/container_start.py"]
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
