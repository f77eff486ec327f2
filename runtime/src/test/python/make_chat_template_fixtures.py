#!/usr/bin/env python3
"""Renders the chat templates in runtime/src/test/resources/chat/templates/ with transformers' own
code path (transformers.utils.chat_template_utils.render_jinja_template, which apply_chat_template
calls with the tokenizer's special tokens as extra variables) for a set of conversations, and writes
the expected strings (or the raised error message) to runtime/src/test/resources/chat/cases.json.

strftime_now is pinned to 2024-07-26 10:00:00 so dates are reproducible (the Java test sets the same
clock). Templates whose source is listed in templates/SOURCES.md.
Usage: /work/pyenv/bin/python make_chat_template_fixtures.py
"""
import datetime as dt
import json
import os

import transformers
from transformers.utils import chat_template_utils

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.normpath(os.path.join(HERE, "..", "resources", "chat"))
FIXED_NOW = dt.datetime(2024, 7, 26, 10, 0, 0)


class FixedDatetime(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


chat_template_utils.datetime = FixedDatetime  # strftime_now reads the module's datetime at call time

# special tokens the templates' tokenizers carry (tokenizer.special_tokens_map of each family)
QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
LLAMA_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
GRANITE_TOKENS = {"bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>", "pad_token": "<|end_of_text|>",
                  "unk_token": "<|end_of_text|>"}
TEMPLATES = {
    "qwen2.5-instruct": QWEN_TOKENS,
    "qwen3-0.6b": QWEN_TOKENS,
    "qwen3-8b": QWEN_TOKENS,
    "qwen3.5": QWEN_TOKENS,
    "qwen3.6": QWEN_TOKENS,
    "llama-3.2-3b-instruct": LLAMA_TOKENS,
    "llama-3.3-70b-instruct": LLAMA_TOKENS,
    "granite-3.3-2b-instruct": GRANITE_TOKENS,
    "granite-4.0-h": GRANITE_TOKENS,
    "shared-tiny": QWEN_TOKENS,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web — returns títulos & snippets",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "default": 5, "minimum": 1},
                "safe": {"type": "boolean"},
                "threshold": {"type": "number", "default": 0.5},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "The capital of France is Paris."}
USER2 = {"role": "user", "content": "And of Germany? Reply with \"quotes\", a back\\slash and\nnewlines."}
CALL = {"role": "assistant", "content": "",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_current_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}}}]}
CALL_TEXT = {"role": "assistant", "content": "Let me check the weather.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "get_current_weather", "arguments": {"location": "Zürich", "unit": "celsius"}}}]}
CALL_STRING_ARGS = {"role": "assistant", "content": None,
                    "tool_calls": [{"id": "call_2", "type": "function",
                                    "function": {"name": "search_web", "arguments": "{\"query\": \"Paris weather\", \"max_results\": 3}"}}]}
CALL_TWO = {"role": "assistant", "content": "",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_current_weather", "arguments": {"location": "Paris"}}},
                {"id": "call_b", "type": "function", "function": {"name": "search_web",
                                                                   "arguments": {"query": "événements à Paris", "max_results": 2, "safe": True, "threshold": 0.25, "tags": ["a", "b"], "filters": {"lang": "fr"}}}},
            ]}
TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_current_weather", "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"}
TOOL_RESULT_B = {"role": "tool", "tool_call_id": "call_b", "name": "search_web", "content": "1. Fête de la musique\n2. Nuit blanche"}
FINAL = {"role": "assistant", "content": "It is 22 °C in Paris."}
REASONING = {"role": "assistant", "content": "Paris.", "reasoning_content": "The user asks about France. Its capital is Paris."}
INLINE_THINK = {"role": "assistant", "content": "<think>\nCapital of France... Paris.\n</think>\n\nParis."}
MULTIMODAL = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe this picture."}]}
MULTIMODAL_TEXT_ONLY = {"role": "user", "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}]}
UNICODE = {"role": "user", "content": "Grüße aus Köln 👋 — 你好，世界！ naïve café\u0301"}

# name -> (messages, tools, add_generation_prompt, extra kwargs, documents)
CONVERSATIONS = {
    "single_user_gen": ([USER], None, True, {}, None),
    "single_user_nogen": ([USER], None, False, {}, None),
    "system_multi_turn_gen": ([SYSTEM, USER, ASSISTANT, USER2], None, True, {}, None),
    "system_multi_turn_nogen": ([SYSTEM, USER, ASSISTANT, USER2, ASSISTANT], None, False, {}, None),
    "unicode": ([UNICODE], None, True, {}, None),
    "tools_user": ([USER], TOOLS, True, {}, None),
    "tools_system_user": ([SYSTEM, USER], TOOLS, True, {}, None),
    "tool_call_and_result": ([SYSTEM, USER, CALL, TOOL_RESULT], TOOLS, True, {}, None),
    "tool_call_with_text_and_final": ([USER, CALL_TEXT, TOOL_RESULT, FINAL], TOOLS, False, {}, None),
    "tool_call_string_arguments": ([USER, CALL_STRING_ARGS, TOOL_RESULT], TOOLS, True, {}, None),
    "two_tool_calls_two_results": ([USER, CALL_TWO, TOOL_RESULT, TOOL_RESULT_B], TOOLS, True, {}, None),
    "thinking_disabled": ([USER], None, True, {"enable_thinking": False}, None),
    "thinking_enabled": ([USER], None, True, {"enable_thinking": True}, None),
    "thinking_disabled_tools": ([SYSTEM, USER], TOOLS, True, {"enable_thinking": False}, None),
    "reasoning_content_last": ([USER, REASONING], None, False, {}, None),
    "reasoning_content_history": ([USER, REASONING, USER2], None, True, {}, None),
    "inline_think_history": ([USER, INLINE_THINK, USER2], None, True, {}, None),
    "inline_think_last": ([USER, INLINE_THINK], None, False, {}, None),
    "preserve_thinking": ([USER, REASONING, USER2], None, True, {"preserve_thinking": True}, None),
    "multimodal_content": ([MULTIMODAL], None, True, {}, None),
    "multimodal_text_parts": ([SYSTEM, MULTIMODAL_TEXT_ONLY], None, True, {}, None),
    "llama_date_and_tools_in_system": ([SYSTEM, USER], TOOLS, True, {"date_string": "01 Jan 2025", "tools_in_user_message": False}, None),
    "llama_builtin_tools": ([USER, CALL, TOOL_RESULT], None, True, {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}, None),
    "granite_documents": ([USER], None, True, {}, [{"doc_id": 1, "title": "Doc", "text": "Paris is the capital of France."},
                                                   {"doc_id": "b2", "title": "Other", "text": "Berlin is the capital of Germany."}]),
    "granite_thinking_controls": ([USER], None, True, {"thinking": True, "controls": {"length": "short", "citations": True}}, None),
    "system_only": ([SYSTEM], None, True, {}, None),
    "no_messages": ([], None, True, {}, None),
}


# Jinja features one at a time: (template, variables). Rendered with the environment transformers compiles.
MICRO = [
    # whitespace control: trim_blocks, lstrip_blocks, '-', '+', comments, raw
    ("{% if true %}\nA\n{% endif %}\nB", {}),
    ("  {% if true %}\n  A\n  {% endif %}\n", {}),
    ("x  {% if true %}y{% endif %}  z", {}),
    ("a\n   {%+ if true %}b{% endif %}", {}),
    ("a\n{% if true +%}\nb{% endif %}", {}),
    ("a   {{- ' b ' -}}   c", {}),
    ("a\n\n  {%- if true -%}  \n\n b  {%- endif %}", {}),
    ("  {# comment #}\nA", {}),
    ("A {#- comment -#} B", {}),
    ("{# multi\nline #}X\n", {}),
    ("{% raw %}{{ not rendered }}{% endraw %}", {}),
    ("  {% raw %}\n  {% x %}\n  {% endraw %}\nY", {}),
    ("line1\r\nline2\rline3\n", {}),
    ("trailing newline kept?\n\n", {}),
    ("{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("\t{% for i in [1, 2] %}\n\t{{ i }}\n\t{% endfor %}\n", {}),
    ("{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}", {}),
    ("{{ {'a': {'b': 1}}['a']['b'] }}", {}),
    # literals and printing
    ("{{ 1 }} {{ 1.0 }} {{ 1.5e-7 }} {{ 2e16 }} {{ 123456789012345678 }} {{ 0.1 + 0.2 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }}", {}),
    ("{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", {}),
    ("{{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ 'tab\\tnew\\nline' }} {{ '\\x41\\u00e9\\U0001F600' }} {{ 'back\\\\slash' }} {{ 'keep\\d' }}", {}),
    ("{{ 'a' 'b' \"c\" }}", {}),
    ("{{ [1, 'two', None, True, 2.5, ['x'], {'k': 'v'}, (1,), (1, 2), ()] }}", {}),
    ("{{ {'a': 1, 'b': [1, {'c': None}]} }} {{ {} }} {{ [] }}", {}),
    ("{{ \"it's\" }}|{{ [\"it's\", 'say \"x\"', 'both \\' \"', '\\n\\t\\x00\\x7f\\u2028é中😀'] }}", {}),
    ("{{ x }}|{{ y }}|{{ z }}", {"x": 5, "y": 2.5, "z": [1.0, -0.0, 1e100, 1e-5, 123.456]}),
    ("{{ (1, 2) }} {{ 1, 2 }}", {}),
    # operators
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -3 + 1 }} {{ - 2 ** 2 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ true }}", {}),
    ("{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 1 + 1.5 }} {{ true + 1 }}", {}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ none == none }}", {}),
    ("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 1.0 in [1] }}", {}),
    ("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or none }} {{ not 0 }} {{ not [1] }}", {}),
    ("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'only' if false }}] {{ 'a' if false else 'b' if true else 'c' }}", {}),
    ("{{ x | length if x is defined else 'undef' }}", {"x": "abc"}),
    ("{{ -x|abs }} {{ (-x)|abs }}", {"x": 3}),
    ("{{ 1 + 1 == 2 and not false }}", {}),
    # attribute / item access, slicing
    ("{{ d.a }} {{ d['a'] }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ l[0] }} {{ l[-1] }} {{ l.0 }}", {"d": {"a": 1}, "l": [7, 8, 9]}),
    ("{{ l[1:] }} {{ l[:2] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ l[1:-1] }} {{ s[::-1] }} {{ s[1:3] }} {{ s[-1] }}", {"l": [1, 2, 3, 4], "s": "héllo😀"}),
    ("[{{ d.missing }}][{{ d['missing'] }}][{{ l[10] }}][{{ s.nope }}]", {"d": {}, "l": [], "s": "x"}),
    ("{{ d.items is defined }} {{ d.items is callable }}", {"d": {"items": 5}}),
    ("{{ d['items'] }}", {"d": {"items": 5}}),
    ("{{ d.values()|list }} {{ d.keys()|list }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": {"b": 2, "a": 1}}),
    ("{{ none.attr }}|{{ (none).x is defined }}", {}),
    # undefined
    ("[{{ u }}][{{ u is defined }}][{{ u is undefined }}][{{ u|default('d') }}][{{ u|length }}][{{ u|list }}][{{ 'x' in u }}][{{ u == u }}][{{ u ~ 'a' }}][{{ not u }}]", {}),
    ("{% for x in u %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("{{ u.attr }}", {}),
    ("{{ u + 1 }}", {}),
    ("{{ u[0] }}", {}),
    ("{{ u() }}", {}),
    ("{{ d.x.y }}", {"d": {}}),
    ("{{ u|tojson }}", {}),
    ("{{ '' | default('empty', true) }} {{ none | default('n') }} {{ false | d('f', boolean=true) }}", {}),
    # loops
    ("{% for x in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}", {"l": "abc"}),
    ("{% for x in l %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}]{% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in l %}{{ loop.cycle('odd', 'even') }} {% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in l if x > 1 %}{{ x }}:{{ loop.index }} {% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("{% for a, b in pairs %}{{ a }}-{{ b }} {% endfor %}", {"pairs": [[1, 2], [3, 4]]}),
    ("{% for a in outer %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}|{{ loop.index }} {% endfor %}", {"outer": [["x", "y"], ["z"]]}),
    ("{% for k in d %}{{ k }}{% endfor %} {% for c in 'ab' %}{{ c }}.{% endfor %}", {"d": {"p": 1, "q": 2}}),
    ("{% for i in range(3) %}{{ i }}{% endfor %} {{ range(2, 10, 3)|list }} {{ range(5, 0, -2)|list }}", {}),
    # scoping
    ("{% set x = 'outer' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}[{{ x }}]{% endfor %}[{{ x }}]", {}),
    ("{% for i in [1, 2] %}{% if i == 1 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %}", {}),
    ("{% if true %}{% set z = 1 %}{% endif %}{{ z }}", {}),
    ("{% set ns = namespace(n=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ ns.missing is defined }}", {}),
    ("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", {}),
    ("{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper %}shout{% endset %}{{ y }}", {}),
    ("{% set messages = messages[1:] %}{{ messages|length }}", {"messages": [1, 2, 3]}),
    # macros and call
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C') }} [{{ greet() }}]", {}),
    ("{% set y = 5 %}{% macro m() %}{{ y }}|{{ z }}{% endmacro %}{% set y = 6 %}{{ m() }}", {"z": 1}),
    ("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", {}),
    ("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}", {}),
    ("{% macro list(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) list([1, 2]) %}[{{ x }}]{% endcall %}", {}),
    ("{% macro m(x) %}\n  {{ x }}\n{% endmacro %}\n{{ m(1) }}|{{ m(2)|trim }}", {}),
    ("{% set ns = namespace(c=0) %}{% macro bump() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.c }}", {}),
    ("{% filter upper %}shout {{ 'it' }}{% endfilter %}", {}),
    # filters
    ("{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}|{{ 'hello wORLD-foo (bar)'|title }}|{{ 'hELLO'|capitalize }}", {}),
    ("{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ [1, 'x', none]|join('|') }}", {}),
    ("{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a', 'C']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} {{ [3, 1]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|join(',') }}", {"users": [{"name": "x", "age": 30}, {"name": "y", "age": 20}]}),
    ("{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [1, 1.0, 2]|unique|list }}", {}),
    ("{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ []|first }} {{ [1, 2]|length }} {{ 'héllo'|length }} {{ {'a': 1}|count }}", {}),
    ("{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ 'ab'|list }} {{ {'k': 1}|list }} {{ {'a': 1, 'b': 2}|items|list }} {{ {'b': 1, 'a': 2}|dictsort }}", {}),
    ("{{ '42'|int }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ '2.5'|float }} {{ 'nope'|float }} {{ 3|float }} {{ true|int }}", {}),
    ("{{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.4|round(0, 'ceil') }} {{ -2.5|round(0, 'floor') }} {{ 5|round }}", {}),
    ("{{ [1, 2, 3]|sum }} {{ items|sum(attribute='v') }} {{ [3, 1, 2]|max }} {{ [3, 1, 2]|min }} {{ ['b', 'A']|max }} {{ -5|abs }}", {"items": [{"v": 1}, {"v": 2}]}),
    ("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 5, 9]|select('gt', 3)|list }}", {}),
    ("{{ users|selectattr('active')|map(attribute='name')|list }} {{ users|rejectattr('active')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'y')|list|length }} {{ users|map(attribute='missing', default='?')|list }}", {"users": [{"name": "x", "active": True}, {"name": "y", "active": False}]}),
    ("{{ ['a', 'b']|map('upper')|list }} {{ [' a ', 'b ']|map('trim')|join(',') }} {{ parts|selectattr('type', 'equalto', 'text')|map(attribute='text')|join('\\n') }}", {"parts": [{"type": "text", "text": "one"}, {"type": "image"}, {"type": "text", "text": "two"}]}),
    ("{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}", {"x": {"b": [1, 2.0, None, True, "é\n\"\\\t\u0001"], "a": {}, "c": [], "d": 1e-7, "e": "😀\u2028"}}),
    ("{{ 'x'|tojson }} {{ 5|tojson }} {{ none|tojson }} {{ (1, 'a')|tojson }} {{ {1: 'a', true: 'b'}|tojson }}", {}),
    ("{{ x|string }} {{ 5|string }} {{ none|string }} {{ [1]|string }} {{ x|safe }} {{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }}", {"x": {"k": "v"}}),
    ("{{ 'one\\ntwo\\n\\nthree'|indent }}|{{ 'one\\ntwo'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(first=true, blank=true) }}|{{ 'hello big world'|wordcount }}", {}),
    ("{{ d|attr('a') }} {{ 'abc'|center(9) }}|", {"d": {"a": 1}}),
    # tests
    ("{{ 1 is odd }} {{ 2 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ none is none }} {{ 1 is number }} {{ true is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }}", {}),
    ("{{ 'a' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }} {{ {} is sequence }} {{ true is boolean }} {{ 1 is boolean }}", {}),
    ("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ 'a' is lower }} {{ 'A' is upper }} {{ x is sameas x }} {{ none is sameas none }} {{ 1 is sameas 1 }}", {"x": [1]}),
    ("{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }} {{ 2 is in [1, 2] }} {{ 'x' is in 'xyz' }} {{ x is not none }}", {"x": 1}),
    ("{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ f is callable }} {{ 1 is callable }} {{ none is defined }}", {"f": None}),
    ("{{ range is callable }} {{ namespace is defined }}", {}),
    # string methods
    ("{{ s.startswith('ab') }} {{ s.startswith(('x', 'a')) }} {{ s.endswith('ef') }} {{ s.startswith('cd', 2) }} {{ s.find('cd') }} {{ s.find('zz') }} {{ s.rfind('c') }} {{ s.count('c') }} {{ s.index('d') }}", {"s": "abcdefc"}),
    ("{{ s.split() }} {{ s.split(' ') }} {{ s.split(None, 1) }} {{ s.rsplit(None, 1) }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ''.split() }} {{ ''.split(',') }}", {"s": "  one two\tthree\n "}),
    ("[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n\\nx\\n'.strip('\\n') }}][{{ s.replace('o', '0') }}][{{ 'aaa'.replace('a', 'b', 1) }}]", {"s": "  hello world  "}),
    ("{{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'ABC def'.lower() }} {{ 'abc'.upper() }} {{ 'hELLO'.capitalize() }} {{ '-'.join(['a', 'b']) }} {{ 'ab\\ncd\\r\\nef'.splitlines() }}", {}),
    ("{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ '7'.zfill(3) }} {{ 'a=b=c'.partition('=') }}", {}),
    ("{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {"content": "<think>\nreason\n</think>\n\nanswer"}),
    # globals and errors
    ("{{ raise_exception('Custom failure: ' ~ 42) }}", {}),
    ("{% if x is not defined %}{{ raise_exception('x is required') }}{% endif %}", {}),
    ("{{ strftime_now('%Y-%m-%d %H:%M %B %b %d %A %a %y %j') }}", {}),
    ("{{ namespace(a=1).a }} {{ dict(a=1, b=2) }} {{ namespace({'k': 2}).k }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ [1][5].x }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{% for x in 5 %}{% endfor %}", {}),
    ("{{ l.append(1) }}", {"l": []}),
    ("{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("{% if %}", {}),
    ("{{ x |}}", {}),
    ("{% endfor %}", {}),
    ("{% for x in y %}", {}),
    ("{{ 'unterminated }}", {}),
    ("{% generation %}tracked{% endgeneration %}", {}),
]


def render_micro(template, variables):
    try:
        compiled = chat_template_utils._compile_jinja_template(template)
        return {"expected": compiled.render(**json.loads(json.dumps(variables)))}
    except Exception as e:
        return {"error": str(e), "error_type": type(e).__name__}


def render(template, tokens, conv):
    messages, tools, agp, kwargs, documents = conv
    # apply_chat_template: template_kwargs = {**special_tokens_map, **kwargs}
    template_kwargs = {**tokens, **kwargs}
    try:
        out, _ = chat_template_utils.render_jinja_template(
            conversations=[json.loads(json.dumps(messages))], tools=tools, documents=documents,
            chat_template=template, add_generation_prompt=agp, **template_kwargs)
        return {"expected": out[0]}
    except Exception as e:  # the message raise_exception (or jinja2) produced
        return {"error": str(e), "error_type": type(e).__name__}


def main():
    tdir = os.path.join(RES, "templates")
    cases = {
        "transformers_version": transformers.__version__,
        "now": FIXED_NOW.isoformat(),
        "conversations": {name: {"messages": c[0], "tools": c[1], "add_generation_prompt": c[2], "kwargs": c[3],
                                 "documents": c[4]} for name, c in CONVERSATIONS.items()},
        "templates": {},
    }
    total = 0
    for name, tokens in TEMPLATES.items():
        with open(os.path.join(tdir, name + ".jinja"), encoding="utf-8") as f:
            template = f.read()
        results = {}
        for cname, conv in CONVERSATIONS.items():
            results[cname] = render(template, tokens, conv)
            total += 1
        cases["templates"][name] = {"special_tokens": tokens, "results": results}
    cases["micro"] = [{"template": t, "variables": v, **render_micro(t, v)} for t, v in MICRO]
    with open(os.path.join(RES, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(cases, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    errors = sum(1 for t in cases["templates"].values() for r in t["results"].values() if "error" in r)
    print(f"{len(MICRO)} micro cases, {sum(1 for m in cases['micro'] if 'error' in m)} raise")
    print(f"wrote {total} cases ({errors} raise) to {os.path.join(RES, 'cases.json')} "
          f"({os.path.getsize(os.path.join(RES, 'cases.json'))} bytes)")


if __name__ == "__main__":
    main()
