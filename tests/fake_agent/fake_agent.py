#!/usr/bin/env python3
"""fake_agent: a scripted coding-agent CLI that speaks OpenCode 1.18.33 `run --format json`.

Registered through a provider TOML with `output = "opencode_events"`, e.g.

    command = ["python3", "/abs/tests/fake_agent/fake_agent.py", "--script", "/abs/script.json",
               "--role", "{role}", "--workspace", "{workspace}", "--model", "{model}"]
    resume = ["--session", "{session}"]

The prompt arrives on stdin. The script (JSON) maps a role to a list of attempts, each a list of
actions; the N-th call for a role plays attempt N (a counter kept in `<script>.state/`). Actions
really happen: commands run through `bash -c` in the workspace with their real exit codes and
output, files are really written, daemons really outlive the agent.

Actions (see tests/fake_agent/README.md for the full contract):
    {"run": CMD}                      one step: a bash tool_use with CMD's real exit and output
    {"write": PATH, "content": S}     one step: a `write` tool_use; the file is written
    {"report": OBJ}                   final step: OBJ as JSON text, reason "stop"
    {"text": S}                       final step: S as the text, reason "stop"
    {"shell_command_final": CMD}      final step: the text {"cmd": CMD}
    {"error": {status, message, retryable}}   an OpenCode `error` event, exit 1
    {"length": true}                  final step cut by the output cap (reason "length")
    {"long_line": N}                  N bytes of `x` and a newline on stdout (one enormous line)
    {"hang": true}                    flush and sleep (until killed; safety cap 300 s)
    {"daemon": CMD}                   start CMD detached (setsid) so it outlives the agent
    {"session": ID}                   the following events carry session ID (a CLI that
                                      answers from another session than it was asked)
    {"exit": N}                       exit with N now

Strings inside `report` (and `text`) may use {{last_event}} (evidence ref of the last command),
{{event:N}} (of the N-th command of this call, 1-based), {{session}}, {{workspace}}, {{role}},
{{attempt}}.

Invariants: stdout carries only OpenCode JSON lines, each flushed as soon as it is written;
diagnostics go to stderr; usage is deterministic (step k of a call: prompt 1000+100k tokens of
which 600+10k cached, completion 40+k of which 12+k reasoning); ids are deterministic per
(script, role, attempt), a fresh call gets a new `ses_<hex>` and `--session ID` keeps ID; every
call is logged to `<script>.state/calls.jsonl` with its prompt saved under `prompts/`. A script
that cannot be played (no attempt left, unknown action, a placeholder citing a command that did
not run) exits 97 with the reason on stderr.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROLES = (
    "requirements",
    "planner",
    "plan_reviewer",
    "builder",
    "tester",
    "completion_reviewer",
    "resolver",
)

# Exit code for a script that cannot be played (missing attempt, bad action): distinct from the
# agent-like codes 0/1 so a test sees a broken script at once.
SCRIPT_ERROR_EXIT = 97

HANG_SAFETY_CAP_S = 300.0

PLACEHOLDER = re.compile(r"\{\{(last_event|event:(\d+)|session|workspace|role|attempt)\}\}")


class ScriptError(Exception):
    pass


def digest(*parts, length=24):
    text = "\x00".join(str(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def now_ms():
    return int(time.time() * 1000)


def state_dir_for(script_path):
    return script_path + ".state"


def next_attempt(state_dir, role):
    """Bump and return this role's 1-based call counter, under an exclusive lock."""
    os.makedirs(state_dir, exist_ok=True)
    with open(os.path.join(state_dir, "lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = os.path.join(state_dir, role + ".count")
        try:
            with open(path) as f:
                count = int(f.read().strip() or "0")
        except FileNotFoundError:
            count = 0
        count += 1
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(count))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return count


def append_jsonl(path, record):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()


class Agent:
    def __init__(self, args, attempt, state_dir):
        self.role = args.role
        self.workspace = args.workspace
        self.model = args.model
        self.attempt = attempt
        self.state_dir = state_dir
        self.resumed = args.session is not None
        self.session = args.session or "ses_" + digest("session", args.script, self.role, attempt)
        self.step = 0
        self.call_ids = []
        # Call ids of bash tool calls only: what {{last_event}} / {{event:N}} cite.
        self.command_ids = []

    # ---- wire -------------------------------------------------------------------------------
    def emit(self, event_type, **fields):
        line = {"type": event_type, "timestamp": now_ms(), "sessionID": self.session}
        line.update(fields)
        sys.stdout.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def ident(self, prefix, *salt):
        return prefix + "_" + digest(prefix, self.session, self.attempt, self.step, *salt, length=26)

    def message_id(self):
        return self.ident("msg")

    def snapshot(self):
        return digest("snapshot", self.session, self.step, length=40)

    def step_start(self):
        self.emit(
            "step_start",
            part={
                "id": self.ident("prt", "start"),
                "messageID": self.message_id(),
                "sessionID": self.session,
                "snapshot": self.snapshot(),
                "type": "step-start",
            },
        )

    def step_finish(self, reason):
        k = self.step
        prompt, cached = 1000 + 100 * k, 600 + 10 * k
        completion, reasoning = 40 + k, 12 + k
        tokens = {
            "total": prompt + completion,
            "input": prompt - cached,
            "output": completion - reasoning,
            "reasoning": reasoning,
            "cache": {"write": 0, "read": cached},
        }
        self.emit(
            "step_finish",
            part={
                "id": self.ident("prt", "finish"),
                "reason": reason,
                "snapshot": self.snapshot(),
                "messageID": self.message_id(),
                "sessionID": self.session,
                "type": "step-finish",
                "tokens": tokens,
                "cost": 0,
            },
        )
        self.step += 1

    def tool_part(self, tool, call_id, state):
        return {
            "type": "tool",
            "tool": tool,
            "callID": call_id,
            "state": state,
            "id": self.ident("prt", "tool", call_id),
            "sessionID": self.session,
            "messageID": self.message_id(),
        }

    def text_part(self, text, start):
        return {
            "id": self.ident("prt", "text"),
            "messageID": self.message_id(),
            "sessionID": self.session,
            "type": "text",
            "text": text,
            "time": {"start": start, "end": now_ms()},
        }

    def new_call_id(self):
        call_id = "call_" + digest("call", self.session, self.attempt, len(self.call_ids), length=16)
        self.call_ids.append(call_id)
        return call_id

    # ---- actions ----------------------------------------------------------------------------
    def bash_step(self, command, runner):
        """One step holding one bash tool call; `runner` does the work and returns (exit, out)."""
        self.step_start()
        call_id = self.new_call_id()
        self.command_ids.append(call_id)
        start = now_ms()
        exit_code, output = runner()
        end = now_ms()
        state = {
            "status": "completed",
            "input": {"command": command},
            "output": output,
            "metadata": {"output": output, "exit": exit_code, "truncated": False},
            "title": command,
            "time": {"start": start, "end": end},
        }
        self.emit("tool_use", part=self.tool_part("bash", call_id, state))
        self.step_finish("tool-calls")

    def run(self, command, forged_exit=None):
        def runner():
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.workspace,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            output = done.stdout.decode("utf-8", errors="replace")
            # bash reports a signal death as 128+N; subprocess gives -N.
            code = done.returncode if done.returncode >= 0 else 128 - done.returncode
            if forged_exit is not None:
                # A lying stream: the event claims an exit code the command did not have.
                code = forged_exit
            return code, output

        self.bash_step(command, runner)

    def daemon(self, command):
        # As a real agent would: a shell that starts the command in its own session in the
        # background and returns at once (its exit, 0, is what the event reports, and what the
        # kernel's exec ledger records for that shell).
        shell = (
            f"setsid bash -c {shlex.quote(command)} </dev/null >/dev/null 2>&1 & echo $!"
        )

        def runner():
            done = subprocess.run(
                ["bash", "-c", shell],
                cwd=self.workspace,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            pid = int(done.stdout.decode().strip() or "0")
            append_jsonl(
                os.path.join(self.state_dir, "daemons.jsonl"),
                {"role": self.role, "attempt": self.attempt, "pid": pid, "command": command},
            )
            return done.returncode, ""

        self.bash_step(shell, runner)

    def write(self, path, content):
        target = path if os.path.isabs(path) else os.path.join(self.workspace, path)
        parent = os.path.dirname(target)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(target, "w") as f:
            f.write(content)
        self.step_start()
        call_id = self.new_call_id()
        start = now_ms()
        state = {
            "status": "completed",
            "input": {"filePath": target, "content": content},
            "output": "Wrote file successfully.",
            "metadata": {"diagnostics": {}, "filepath": target, "exists": True},
            "title": os.path.relpath(target, self.workspace),
            "time": {"start": start, "end": now_ms()},
        }
        self.emit("tool_use", part=self.tool_part("write", call_id, state))
        self.step_finish("tool-calls")

    def final_text(self, text, reason="stop"):
        self.step_start()
        start = now_ms()
        self.emit("text", part=self.text_part(text, start))
        self.step_finish(reason)

    def error(self, spec):
        status = int(spec.get("status", 500))
        message = str(spec.get("message", "mock %d error" % status))
        retryable = bool(spec.get("retryable", status in (429, 500, 502, 503, 529)))
        headers = {"content-type": "application/json"}
        if "retry_after" in spec:
            headers["retry-after"] = str(spec["retry_after"])
        body = {"error": {"message": message, "type": spec.get("type", "api_error"), "code": None}}
        self.emit(
            "error",
            error={
                "name": spec.get("name", "APIError"),
                "data": {
                    "message": message,
                    "statusCode": status,
                    "isRetryable": retryable,
                    "responseHeaders": headers,
                    "responseBody": json.dumps(body),
                    "metadata": {"url": "http://127.0.0.1:0/v1/chat/completions"},
                },
            },
        )

    def long_line(self, size):
        """SIZE bytes of `x` and a newline on stdout, written 1 MiB at a time (never held whole):
        a CLI that prints one enormous line."""
        sys.stdout.flush()
        chunk = b"x" * (1 << 20)
        left = size
        out = sys.stdout.buffer
        while left > 0:
            out.write(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))
        out.write(b"\n")
        out.flush()

    def hang(self):
        marker = os.path.join(self.state_dir, "%s-%d.hanging" % (self.role, self.attempt))
        tmp = marker + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, marker)
        deadline = time.monotonic() + HANG_SAFETY_CAP_S
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        sys.stderr.write("fake_agent: hang safety cap reached\n")
        sys.exit(124)

    # ---- substitution -----------------------------------------------------------------------
    def substitute(self, value):
        if isinstance(value, str):
            return PLACEHOLDER.sub(self.placeholder, value)
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        if isinstance(value, dict):
            return {k: self.substitute(v) for k, v in value.items()}
        return value

    def placeholder(self, match):
        name = match.group(1)
        if name == "last_event":
            if not self.command_ids:
                raise ScriptError("{{last_event}} used before any command ran")
            return "event:" + self.command_ids[-1]
        if name.startswith("event:"):
            index = int(match.group(2))
            if not 1 <= index <= len(self.command_ids):
                raise ScriptError(
                    "{{event:%d}}: only %d command(s) ran in this call"
                    % (index, len(self.command_ids))
                )
            return "event:" + self.command_ids[index - 1]
        if name == "session":
            return self.session
        if name == "workspace":
            return self.workspace
        if name == "role":
            return self.role
        return str(self.attempt)

    # ---- play -------------------------------------------------------------------------------
    def play(self, actions):
        """Play the actions in order; returns the exit code."""
        for index, action in enumerate(actions):
            if not isinstance(action, dict) or not action:
                raise ScriptError("action %d is not a non-empty object: %r" % (index, action))
            if "run" in action:
                forged = action.get("fake_exit")
                self.run(str(action["run"]), None if forged is None else int(forged))
            elif "write" in action:
                self.write(str(action["write"]), str(action.get("content", "")))
            elif "report" in action:
                text = json.dumps(self.substitute(action["report"]), ensure_ascii=False)
                self.final_text(text)
            elif "text" in action:
                self.final_text(self.substitute(str(action["text"])))
            elif "shell_command_final" in action:
                self.final_text(json.dumps({"cmd": str(action["shell_command_final"])}))
            elif "error" in action:
                spec = action["error"] if isinstance(action["error"], dict) else {}
                self.error(spec)
                return 1
            elif "length" in action:
                # The model ran out of output tokens mid-report: a cut JSON text.
                self.final_text('{"status": "done", "summary": "The change was made and', "length")
            elif "long_line" in action:
                self.long_line(int(action["long_line"]))
            elif "hang" in action:
                self.hang()
            elif "daemon" in action:
                self.daemon(str(action["daemon"]))
            elif "session" in action:
                # A CLI that answers from another session than the one it was asked to resume.
                self.session = str(action["session"])
            elif "exit" in action:
                return int(action["exit"])
            else:
                raise ScriptError("action %d has no known key: %s" % (index, sorted(action)))
        return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="fake_agent", description=__doc__.split("\n")[0])
    parser.add_argument("--script", required=True)
    parser.add_argument("--role", required=True, choices=ROLES)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--session")
    parser.add_argument("--effort")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    script_path = os.path.abspath(args.script)
    args.script = script_path
    prompt = sys.stdin.read() if not sys.stdin.isatty() else ""
    try:
        with open(script_path) as f:
            script = json.load(f)
    except (OSError, ValueError) as error:
        sys.stderr.write("fake_agent: cannot read script %s: %s\n" % (script_path, error))
        return SCRIPT_ERROR_EXIT
    state_dir = state_dir_for(script_path)
    attempt = next_attempt(state_dir, args.role)
    agent = Agent(args, attempt, state_dir)

    prompts = os.path.join(state_dir, "prompts")
    os.makedirs(prompts, exist_ok=True)
    prompt_file = os.path.join(prompts, "%s-%d.md" % (args.role, attempt))
    with open(prompt_file, "w") as f:
        f.write(prompt)
    append_jsonl(
        os.path.join(state_dir, "calls.jsonl"),
        {
            "role": args.role,
            "attempt": attempt,
            "session": agent.session,
            "resumed": agent.resumed,
            "model": args.model,
            "effort": args.effort,
            "workspace": args.workspace,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "prompt_file": prompt_file,
        },
    )

    attempts = script.get(args.role) if isinstance(script, dict) else None
    if not isinstance(attempts, list) or not 1 <= attempt <= len(attempts):
        have = len(attempts) if isinstance(attempts, list) else 0
        sys.stderr.write(
            "fake_agent: script has %d attempt(s) for role %s; this is call %d\n"
            % (have, args.role, attempt)
        )
        return SCRIPT_ERROR_EXIT
    actions = attempts[attempt - 1]
    if not isinstance(actions, list):
        sys.stderr.write("fake_agent: %s attempt %d is not a list\n" % (args.role, attempt))
        return SCRIPT_ERROR_EXIT
    try:
        return agent.play(actions)
    except ScriptError as error:
        sys.stderr.write("fake_agent: %s attempt %d: %s\n" % (args.role, attempt, error))
        return SCRIPT_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
