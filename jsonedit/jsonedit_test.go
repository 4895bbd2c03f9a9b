package jsonedit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseObject: no panic, and formatting is stable.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2,{"c":"<x>"}]}`, `{"a":1e9}`, `{`, `{"a":}`, `[]`, `{"a":1} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseObject(b)
		if err != nil {
			return
		}
		out := o.Format("  ")
		o2, err := ParseObject(out)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if !bytes.Equal(o2.Format("  "), out) {
			t.Fatalf("format not stable for %q", b)
		}
	})
}

// Format gives an edited file back with only what changed changed:
// untouched members keep their exact text (odd spacing included).
func TestFormatKeepsUntouchedText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		edit     func(o *Object)
		want     string
	}{
		{"no edit", "{ \"a\":1 ,  \"b\" :[1,2]   }\n", func(o *Object) {}, "{ \"a\":1 ,  \"b\" :[1,2]   }\n"},
		{"change one", "{\n    \"a\":1,   \n    \"b\": [1, 2]\n}\n", func(o *Object) { o.Set("b", json.RawMessage(`3`)) }, "{\n    \"a\":1,   \n    \"b\": 3\n}\n"},
		{"add one", "{\n    \"a\":1\n}", func(o *Object) { o.Set("b", json.RawMessage(`{"c":[1]}`)) }, "{\n    \"a\":1,\n    \"b\":{\n        \"c\": [\n            1\n        ]\n    }\n}"},
		{"remove the first", "{\n  \"a\": 1,\n  \"b\": 2\n}\n", func(o *Object) { o.Delete("a") }, "{\n  \"b\": 2\n}\n"},
		{"remove the last", "{\n  \"a\": 1,\n  \"b\": 2\n}\n", func(o *Object) { o.Delete("b") }, "{\n  \"a\": 1\n}\n"},
		{"remove the only one", "{\n  \"a\": 1\n}\n", func(o *Object) { o.Delete("a") }, "{\n}\n"},
		{"add to an empty one", "{}\n", func(o *Object) { o.Set("a", json.RawMessage(`1`)) }, "{\n  \"a\": 1\n}\n"},
		{"nested edit", "{\"m\": {\"x\":  {\"k\":1},\n  \"y\" : 2}}", func(o *Object) {
			m, _, _ := o.Object("m")
			x, _, _ := m.Object("x")
			x.Set("k", json.RawMessage(`5`))
			m.SetObject("x", x)
			o.SetObject("m", m)
		}, "{\"m\": {\"x\":  {\"k\":5},\n  \"y\" : 2}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseObject([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(o)
			got := o.Format("  ")
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if _, err := ParseObject(got); err != nil {
				t.Errorf("the result is not valid JSON: %v", err)
			}
		})
	}
}

// FuzzFormatAfterEdits: whatever the file's layout, an edited object is
// written as valid JSON holding exactly the edited members.
func FuzzFormatAfterEdits(f *testing.F) {
	for _, s := range []string{"{}", "{\"a\":1}", "{\n  \"a\": {\"b\": [1, 2]},\n  \"c\" : \"x\"  \n}\n", " { \"m\" : { } } "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseObject(b)
		if err != nil {
			return
		}
		keys := o.Keys()
		if len(keys) > 0 {
			o.Delete(keys[0])
			if sub, ok, err := o.Object(keys[len(keys)-1]); ok && err == nil {
				sub.Set("new", json.RawMessage(`{"x":[1,{"y":2}]}`))
				o.SetObject(keys[len(keys)-1], sub)
			}
		}
		o.Set("zz", json.RawMessage(`[true, null]`))
		got := o.Format("  ")
		back, err := ParseObject(got)
		if err != nil {
			t.Fatalf("edited %q gives invalid JSON %q: %v", b, got, err)
		}
		if !reflect.DeepEqual(back.Keys(), o.Keys()) {
			t.Fatalf("keys %v, want %v", back.Keys(), o.Keys())
		}
	})
}
