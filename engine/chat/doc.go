// Package chat renders a conversation into the prompt text a model was
// trained on, with the model's own Jinja chat template
// (chat_template.jinja, or tokenizer_config.json's chat_template), and
// falls back to ChatML only when the model has none.
//
// Dependency: github.com/ardanlabs/jinja v1.8.0, a pure-Go Jinja engine
// written for chat templates, with no dependencies of its own. It renders
// the Qwen3 template (namespace, loop.last/loop.index0, messages[::-1],
// tojson, raise_exception, startswith/endswith/split/strip/lstrip/rstrip,
// "is string", add_generation_prompt, enable_thinking) byte for byte like
// @huggingface/jinja, which the tests use as the oracle. It was chosen
// over github.com/nikolalohinski/gonja/v2 (v2.9.1 also renders Qwen3 right,
// but brings logrus, x/exp and other modules). v1.9.0 and later need Go
// 1.27; v1.8.0 is the newest that builds with this project's Go 1.26.
// Nothing had to be patched or registered.
package chat
