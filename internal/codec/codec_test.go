package codec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMarshalNoEscape(t *testing.T) {
	got, err := MarshalNoEscape(map[string]string{"a": "<b> & c"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"<b> & c"}`; string(got) != want {
		t.Errorf("MarshalNoEscape = %s, want %s", got, want)
	}
	if _, err := MarshalNoEscape(func() {}); err == nil {
		t.Error("MarshalNoEscape(func) succeeded")
	}
}

func TestMust(t *testing.T) {
	if got := Must(3, nil); got != 3 {
		t.Errorf("Must(3, nil) = %d", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Must with an error did not panic")
		}
	}()
	Must(0, errors.New("boom"))
}

func TestMarshalledLenStringAppend(t *testing.T) {
	values := []any{
		map[string]any{"a": "<b> & c", "u": "\u2028", "n": 1.5, "l": []int{1, 2}},
		"plain", 42, nil, []string{}, struct {
			X string `json:"x,omitempty"`
		}{},
		strings.Repeat("long text ", 20000), // beyond the buffers kept for reuse
	}
	for range 3 { // and again, through reused buffers
		for _, v := range values {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := MarshalledLen(v); got != len(want) {
				t.Errorf("MarshalledLen(%.40v) = %d, want %d", v, got, len(want))
			}
			got, err := MarshalString(v)
			if err != nil || got != string(want) {
				t.Errorf("MarshalString(%.40v) = %.60q, %v, want %.60q", v, got, err, want)
			}
			app, err := AppendMarshal([]byte("x:"), v)
			if err != nil || string(app) != "x:"+string(want) {
				t.Errorf("AppendMarshal(x:, %.40v) = %.60q, %v, want x:%.60q", v, app, err, want)
			}
		}
	}
	if got, err := AppendMarshal([]byte("x:"), func() {}); err == nil || string(got) != "x:" {
		t.Errorf("AppendMarshal(x:, func) = %q, %v, want x: and an error", got, err)
	}
	if got := MarshalledLen(func() {}); got != 0 {
		t.Errorf("MarshalledLen(func) = %d, want 0", got)
	}
	if _, err := MarshalString(func() {}); err == nil {
		t.Error("MarshalString(func) succeeded")
	}
}

func TestCutUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"}, {"hello", 3, "hel"}, {"héllo", 2, "h"}, {"héllo", 3, "hé"}, {"日本", 2, ""}, {"abc", 0, ""},
	} {
		if got := CutUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// TestAppended: each call's text is its own, whatever later calls write
// into the reused buffer, short or long.
func TestAppended(t *testing.T) {
	var texts []string
	for i, n := range []int{10, 5000, 3, 100000, 7} {
		s, ok := Appended(func(b []byte) ([]byte, bool) {
			return append(b, strings.Repeat(string(rune('a'+i)), n)...), i != 2
		})
		if ok != (i != 2) {
			t.Errorf("call %d reported %v", i, ok)
		}
		texts = append(texts, s)
	}
	for i, n := range []int{10, 5000, 3, 100000, 7} {
		if want := strings.Repeat(string(rune('a'+i)), n); texts[i] != want {
			t.Errorf("call %d's text changed: %.20q…", i, texts[i])
		}
	}
}
