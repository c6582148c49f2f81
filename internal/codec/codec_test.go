package codec

import (
	"errors"
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
