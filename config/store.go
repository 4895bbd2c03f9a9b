package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npuchat/npuchat/enginekind"
	"github.com/npuchat/npuchat/eventbus"
)

// Store owns the settings while NPU Chat runs: the one place they are
// read (Get), changed and saved (Update) and watched (Subscribe). The
// app makes one (NewStore) and is its only owner; the chat page and the
// tray change settings through the app, which pushes the live values
// (keep-alive, engine) into the service after each change. Safe for
// concurrent use.
//
// The values are the effective ones: the settings file with this run's
// environment variables and flags over it. Update writes into the file
// the settings a change touched and nothing else (UpdateSettings, with
// package jsonedit): a value that came from a flag or the environment
// and was left alone stays out of the file, and every key of the file
// Settings does not know stays as it was.
//
// A new setting is a field of Settings (with its json key) and, when it
// has bad values, a case in check: Update, the file and the subscribers
// follow.
type Store struct {
	path string
	bus  *eventbus.Bus

	mu  sync.Mutex // guards cur, and orders saves
	cur Settings
}

// NewStore returns a store holding cfg's settings (the effective ones)
// and saving to cfg.SettingsPath. It keeps its own copy.
func NewStore(cfg *Config) *Store {
	return &Store{path: cfg.SettingsPath, bus: eventbus.New(), cur: clone(cfg.Settings)}
}

// Path is the settings file.
func (s *Store) Path() string { return s.path }

// Get returns the settings now (a copy).
func (s *Store) Get() Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.cur)
}

// FieldError is a setting with a value that cannot work: Field is its
// JSON key ("keep_alive", "chat.temperature"), Message says why and what
// would do, for a person.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Update changes the settings: change edits a copy of them, the result
// is checked (a bad value is a *FieldError and nothing is saved), the
// settings that differ are written into the file, and subscribers get
// the new settings. It returns the settings after the change.
func (s *Store) Update(ctx context.Context, change func(*Settings) error) (Settings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := clone(s.cur)
	if err := change(&next); err != nil {
		return s.cur, err
	}
	normalize(s.cur, &next)
	if errs := CheckChange(s.cur, next); errs != nil {
		return clone(s.cur), errs
	}
	if err := checkMCP(s.cur.MCPServers, next.MCPServers); err != nil {
		return clone(s.cur), err
	}
	changes := diff("", reflect.ValueOf(s.cur), reflect.ValueOf(next))
	tokenChanged := next.HFToken != s.cur.HFToken
	mcpTokensChanged := mcpTokensChanged(s.cur.MCPServers, next.MCPServers)
	if len(changes) == 0 && !tokenChanged && !mcpTokensChanged {
		return clone(s.cur), nil
	}
	if tokenChanged {
		if err := writeToken(TokenPath(s.path), next.HFToken); err != nil {
			return clone(s.cur), err
		}
	}
	if mcpTokensChanged {
		if err := writeMCPTokens(s.path, next.MCPServers); err != nil {
			if tokenChanged {
				writeToken(TokenPath(s.path), s.cur.HFToken)
			}
			return clone(s.cur), err
		}
	}
	if err := UpdateSettings(s.path, changes...); err != nil {
		// The change is all or nothing.
		if tokenChanged {
			writeToken(TokenPath(s.path), s.cur.HFToken)
		}
		if mcpTokensChanged {
			writeMCPTokens(s.path, s.cur.MCPServers)
		}
		return clone(s.cur), err
	}
	s.cur = next
	eventbus.Publish(s.bus, clone(next))
	return clone(next), nil
}

// Subscribe returns the settings after each change, starting with the
// settings now, and a function that ends the subscription. A slow
// reader misses intermediate settings, never the last.
func (s *Store) Subscribe() (<-chan Settings, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := eventbus.Subscribe(s.bus, eventbus.Options[Settings]{
		Buffer:  4,
		Replace: func(old, next Settings) bool { return true },
	}, clone(s.cur))
	return sub.Events(), sub.Close
}

// Close ends every subscription.
func (s *Store) Close() { s.bus.Close() }

// KeepAliveDuration is the keep-alive setting as a duration (the
// default when it is empty or cannot be read: check refuses that).
func (s Settings) KeepAliveDuration() time.Duration {
	d, err := ParseKeepAlive(s.KeepAlive)
	if err != nil {
		return DefaultKeepAlive
	}
	return d
}

// normalize makes a changed value that means the same as before the
// same text ("5m" for "5m0s"), so that it is no change.
func normalize(before Settings, next *Settings) {
	next.KeepAlive = strings.TrimSpace(next.KeepAlive)
	next.Engine = strings.TrimSpace(next.Engine)
	next.HFEndpoint = strings.TrimRight(strings.TrimSpace(next.HFEndpoint), "/")
	next.HFToken = Secret(strings.TrimSpace(next.HFToken.Reveal()))
	next.APIKey = strings.TrimSpace(next.APIKey)
	normalizeMCP(next.MCPServers)
	if len(next.MCPServers) == 0 {
		next.MCPServers = nil // no servers: the key leaves the file
	}
	if next.ModelsDir = strings.TrimSpace(next.ModelsDir); next.ModelsDir != "" && filepath.IsAbs(next.ModelsDir) {
		next.ModelsDir = filepath.Clean(next.ModelsDir)
	}
	if next.KeepAlive != before.KeepAlive {
		a, errA := ParseKeepAlive(before.KeepAlive)
		b, errB := ParseKeepAlive(next.KeepAlive)
		if errA == nil && errB == nil && a == b && next.KeepAlive != "" {
			next.KeepAlive = before.KeepAlive
		}
	}
}

// MinContextLength and MaxContextLength bound the context_length
// setting (the model's own maximum clamps it further at load).
const (
	MinContextLength = 512
	MaxContextLength = 1 << 18
)

// KVCacheTypes are the kv_cache_type setting's values, the default
// first: the CPU engine's KV cache types (engine.KVTypes; a test in
// service/cpu keeps the two lists equal).
var KVCacheTypes = []string{"f32", "f16", "q8_0"}

// CheckKVCacheType refuses a kv_cache_type that is not one of
// KVCacheTypes ("" is the default).
func CheckKVCacheType(t string) error {
	if t == "" || slices.Contains(KVCacheTypes, t) {
		return nil
	}
	return fmt.Errorf("KV cache type %q: choose one of %s", t, strings.Join(KVCacheTypes, ", "))
}

// SpeculativeModes are the speculative setting's values, the default
// first (engine.Speculative's; "" is the default).
var SpeculativeModes = []string{"off", "auto"}

// CheckSpeculative refuses a speculative setting that is not one of
// SpeculativeModes.
func CheckSpeculative(m string) error {
	if m == "" || slices.Contains(SpeculativeModes, m) {
		return nil
	}
	return fmt.Errorf("speculative %q: choose one of %s", m, strings.Join(SpeculativeModes, ", "))
}

// MaxParallel bounds the parallel setting (requests answered at once).
const MaxParallel = 16

// MaxTokensLimit is the largest max_tokens a chat default may have.
const MaxTokensLimit = 1 << 20

// check refuses settings that cannot work: every bad field at once,
// each a *FieldError whose message names the setting as the settings
// page does (errors.Join; nil when all is well; FieldErrors lists them).
func check(s Settings) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	switch kind, err := enginekind.ParseEngine(s.Engine); {
	case err != nil:
		bad("engine", "engine must be one of %s, got %q", enginekind.EngineNames(), s.Engine)
	case kind == enginekind.Remote && s.RemoteURL == "":
		bad("engine", "the remote engine needs a remote server's URL (remote_url in the settings file, NPUCHAT_REMOTE_URL or --remote-url)")
	}
	if d, err := ParseKeepAlive(s.KeepAlive); err != nil {
		bad("keep_alive", "keep-alive %q: write a duration such as 5m or 1h, or -1 to keep the model loaded", s.KeepAlive)
	} else if d < 0 && !keepForever(s.KeepAlive) {
		bad("keep_alive", "the time before the model is unloaded cannot be negative (got %s): write 0 or more, or choose never (-1) to keep it loaded", strings.TrimSpace(s.KeepAlive))
	}
	if n := s.ContextLength; n != 0 && (n < MinContextLength || n > MaxContextLength) {
		bad("context_length", "the context length must be 0 (automatic) or between %d and %d tokens, got %d", MinContextLength, MaxContextLength, n)
	}
	if n := s.Parallel; n < 0 || n > MaxParallel {
		bad("parallel", "requests answered at once must be 0 (automatic) or between 1 and %d, got %d", MaxParallel, n)
	}
	if err := CheckKVCacheType(s.KVCacheType); err != nil {
		bad("kv_cache_type", "%v", err)
	}
	if err := CheckSpeculative(s.Speculative); err != nil {
		bad("speculative", "%v", err)
	}
	c := s.Chat
	if t := c.Temperature; t != nil && (*t < 0 || *t > 2) {
		bad("temperature", "the temperature must be between 0 and 2, got %g", *t)
	}
	if t := c.TopP; t != nil && (*t < 0 || *t > 1) {
		bad("top_p", "top-p must be between 0 and 1, got %g", *t)
	}
	if m := c.MaxTokens; m != nil && (*m < 1 || *m > MaxTokensLimit) {
		bad("max_tokens", "max tokens must be between 1 and %d, got %d", MaxTokensLimit, *m)
	}
	if msg := checkEndpoint(s.HFEndpoint); msg != "" {
		bad("hf_endpoint", "%s", msg)
	}
	if msg := checkToken(s.HFToken); msg != "" {
		bad("hf_token", "%s", msg)
	}
	if msg := checkModelsDir(s.ModelsDir); msg != "" {
		bad("models_dir", "%s", msg)
	}
	if field, msg := checkAddr(s.Addr, s.APIKey); field != "" && s.Addr != "" {
		bad(field, "%s", msg)
	}
	if s.QueueSize < 0 {
		bad("queue_size", "the queue size must be 0 (the default) or more, got %d", s.QueueSize)
	}
	if s.Threads < 0 {
		bad("threads", "threads must be 0 (all cores) or more, got %d", s.Threads)
	}
	if msg := checkAddedModels(s.AddedModels); msg != "" {
		bad("added_models", "%s", msg)
	}
	if len(errs) == 1 {
		return errs[0] // one bad field is its *FieldError itself
	}
	return errors.Join(errs...)
}

// CheckChange refuses a change from before to after that cannot work,
// as Update does: every bad field at once, each a *FieldError (one bad
// field is its *FieldError itself), and a new models folder that is not
// there. A caller that found a bad field of its own uses it to name the
// others with it.
func CheckChange(before, after Settings) error {
	errs := check(after)
	if after.ModelsDir == before.ModelsDir {
		return errs
	}
	msg := checkModelsDirExists(after.ModelsDir)
	switch {
	case msg == "":
		return errs
	case errs == nil:
		return &FieldError{Field: "models_dir", Message: msg}
	}
	return errors.Join(errs, &FieldError{Field: "models_dir", Message: msg})
}

// keepForever reports whether a negative keep-alive is the documented
// "never unload": -1, in any unit ("-1", "-1m", "-1h").
func keepForever(keepAlive string) bool {
	k := strings.TrimSpace(keepAlive)
	if strings.HasPrefix(strings.ToLower(k), "never") { // as KeepAliveWords writes it
		return true
	}
	return strings.TrimRight(k, "nsuµmh") == "-1"
}

// FieldErrors lists the bad settings in err (one *FieldError, or several
// joined), in order; nil when err holds none.
func FieldErrors(err error) []*FieldError {
	var fe *FieldError
	if errors.As(err, &fe) && err == error(fe) {
		return []*FieldError{fe}
	}
	var out []*FieldError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, FieldErrors(e)...)
		}
		return out
	}
	if u := errors.Unwrap(err); u != nil {
		return FieldErrors(u)
	}
	return nil
}

// checkAddedModels says what is wrong with the list of added models
// ("" when nothing): each needs a name of its own and a whole path.
func checkAddedModels(ms []AddedModel) string {
	seen := map[string]bool{}
	for _, m := range ms {
		key := strings.ToLower(m.Name)
		switch {
		case strings.TrimSpace(m.Name) == "":
			return fmt.Sprintf("the model added from %q has no name", m.Path)
		case seen[key]:
			return fmt.Sprintf("two added models are named %q: rename or remove one", m.Name)
		case !filepath.IsAbs(m.Path):
			return fmt.Sprintf("the added model %q has no whole path (%q)", m.Name, m.Path)
		}
		seen[key] = true
	}
	return ""
}

// diff lists the changes that make the settings file say after where
// it said before, one per changed field, by its json key (nested
// structs by "parent.child"). A value that means "the default" (an
// empty string, a zero number, a nil pointer or list) removes the key;
// false is written as false.
func diff(prefix string, before, after reflect.Value) []Change {
	var out []Change
	t := after.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			out = append(out, diff(prefix, before.Field(i), after.Field(i))...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		b, a := before.Field(i), after.Field(i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, diff(prefix+name+".", b, a)...)
			continue
		}
		if reflect.DeepEqual(b.Interface(), a.Interface()) {
			continue
		}
		var v any
		switch {
		case a.Kind() == reflect.Pointer && !a.IsNil():
			v = a.Elem().Interface()
		case a.Kind() == reflect.Bool || !a.IsZero():
			v = a.Interface()
		}
		out = append(out, Change{Key: prefix + name, Value: v})
	}
	return out
}

// clone copies settings deeply (the pointers and lists are not shared).
func clone(s Settings) Settings {
	if s.Origins != nil {
		s.Origins = append([]string{}, s.Origins...)
	}
	if s.AddedModels != nil {
		s.AddedModels = append([]AddedModel{}, s.AddedModels...)
	}
	s.MCPServers = cloneMCP(s.MCPServers)
	s.Chat = ChatDefaults{Temperature: clonePtr(s.Chat.Temperature), TopP: clonePtr(s.Chat.TopP), MaxTokens: clonePtr(s.Chat.MaxTokens)}
	return s
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// IsFieldError reports whether err is a bad setting (a *FieldError).
func IsFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}
