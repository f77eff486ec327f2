#!/usr/bin/env python3
"""Checks a running v100 server with the official `openai` Python client (strict response validation).

    /work/pyenv/bin/python runtime/src/test/python/openai_client_check.py \
        --base-url http://127.0.0.1:8000/v1 [--api-key K] [--expect-tool-call]

Covers: /v1/models, chat non-stream, chat stream with include_usage, completions (both modes),
tool calls (required with --expect-tool-call, reported otherwise), and bad requests (400, 404,
401 when a key is set). Exits 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import sys

import openai

failures = []


def check(name, cond, detail=""):
    print(("PASS " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)))
    if not cond:
        failures.append(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--api-key", default="no-key")
    ap.add_argument("--expect-tool-call", action="store_true")
    args = ap.parse_args()

    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120,
                           _strict_response_validation=True)

    models = client.models.list().data
    check("models.list returns one model", len(models) == 1, models)
    model = models[0].id
    print("model:", model, "max_model_len:", getattr(models[0], "max_model_len", None))

    messages = [{"role": "user", "content": "Say hello."}]
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0, seed=1)
    c = r.choices[0]
    check("chat: id prefix", r.id.startswith("chatcmpl-"), r.id)
    check("chat: object", r.object == "chat.completion", r.object)
    check("chat: assistant text", c.message.role == "assistant" and isinstance(c.message.content, str)
          and len(c.message.content) > 0, c.message)
    check("chat: finish_reason", c.finish_reason in ("stop", "length"), c.finish_reason)
    u = r.usage
    check("chat: usage", u is not None and u.prompt_tokens > 0 and u.completion_tokens > 0
          and u.total_tokens == u.prompt_tokens + u.completion_tokens, u)
    whole = c.message.content

    chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0,
                                                 seed=1, stream=True, stream_options={"include_usage": True}))
    check("stream: one id", len({ch.id for ch in chunks}) == 1, {ch.id for ch in chunks})
    check("stream: chunk object", all(ch.object == "chat.completion.chunk" for ch in chunks))
    check("stream: first delta is the role", chunks[0].choices[0].delta.role == "assistant", chunks[0])
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check("stream: same text as non-stream (temperature 0)", text == whole, (text, whole))
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    check("stream: one finish_reason", finishes in (["stop"], ["length"]), finishes)
    last = chunks[-1]
    check("stream: usage chunk last with empty choices", last.choices == [] and last.usage is not None
          and last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens, last)
    check("stream: usage null before the last chunk", all(ch.usage is None for ch in chunks[:-1]))

    # the accumulating stream helper must see a well-formed stream too
    with client.chat.completions.stream(model=model, messages=messages, max_tokens=16, temperature=0,
                                        seed=1) as s:
        final = s.get_final_completion()
    check("stream helper: final completion", final.choices[0].message.content == whole, final)

    t = client.completions.create(model=model, prompt="Once upon a time", max_tokens=8, temperature=0)
    check("completions: text", t.object == "text_completion" and isinstance(t.choices[0].text, str)
          and t.usage.completion_tokens > 0, t)
    # not strict: the SDK types stream chunks of /v1/completions as Completion, whose finish_reason may not
    # be null, yet OpenAI and vLLM send null on every chunk but the last
    lenient = openai.OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0, timeout=120)
    tchunks = list(lenient.completions.create(model=model, prompt="Once upon a time", max_tokens=8,
                                             temperature=0, stream=True))
    check("completions stream: same text", "".join(ch.choices[0].text for ch in tchunks) == t.choices[0].text,
          tchunks)
    check("completions stream: finish_reason only on the last chunk",
          [ch.choices[0].finish_reason for ch in tchunks][-1] in ("stop", "length")
          and all(ch.choices[0].finish_reason is None for ch in tchunks[:-1]), tchunks)

    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    tr = client.chat.completions.create(model=model, max_tokens=64, temperature=0, tools=tools, messages=[
        {"role": "user", "content": "What is the weather in Paris? Use the tool."}])
    calls = tr.choices[0].message.tool_calls
    if calls:
        check("tools: finish_reason tool_calls", tr.choices[0].finish_reason == "tool_calls", tr)
        check("tools: arguments are a JSON string", isinstance(json.loads(calls[0].function.arguments), dict), calls)
        print("tool call:", calls[0].function.name, calls[0].function.arguments)
        with client.chat.completions.stream(model=model, max_tokens=64, temperature=0, tools=tools, messages=[
                {"role": "user", "content": "What is the weather in Paris? Use the tool."}]) as s:
            sfinal = s.get_final_completion()
        scalls = sfinal.choices[0].message.tool_calls or []
        check("tools stream: same call accumulated from chunks",
              [(x.function.name, x.function.arguments) for x in scalls]
              == [(x.function.name, x.function.arguments) for x in calls]
              and sfinal.choices[0].finish_reason == "tool_calls", sfinal)
    elif args.expect_tool_call:
        check("tools: a tool call was expected", False, tr.choices[0].message)
    else:
        print("INFO tools: the model answered without a tool call:", tr.choices[0].message.content)

    try:
        client.chat.completions.create(model=model, messages=messages, temperature=-1)
        check("bad request: temperature -1 is rejected", False, "no error")
    except openai.BadRequestError as e:
        check("bad request: temperature -1 -> 400", e.status_code == 400 and e.body.get("param") == "temperature",
              e.body)
    try:
        client.chat.completions.create(model="no-such-model", messages=messages)
        check("unknown model is rejected", False, "no error")
    except openai.NotFoundError as e:
        check("unknown model -> 404 model_not_found", e.status_code == 404 and e.code == "model_not_found", e.body)
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": 123}])
        check("bad content is rejected", False, "no error")
    except openai.BadRequestError as e:
        check("bad content -> 400", e.status_code == 400, e.body)
    if args.api_key != "no-key":
        bad = openai.OpenAI(base_url=args.base_url, api_key="wrong-key", max_retries=0)
        try:
            bad.models.list()
            check("models.list is public without a key", True)
            bad.chat.completions.create(model=model, messages=messages)
            check("wrong key is rejected", False, "no error")
        except openai.AuthenticationError as e:
            check("wrong key -> 401", e.status_code == 401, e.body)

    print("OK: all checks passed" if not failures else "FAILED: " + ", ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
