package sandbox

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func fakeDriver(name string, auto int) Driver {
	return Driver{
		Name: name,
		Auto: auto,
		Open: func(context.Context, Config, string) (Backend, error) { return nil, nil },
		Diagnose: func(context.Context, Config, string) (Found, error) {
			return Found{}, nil
		},
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	for _, d := range []Driver{fakeDriver("zeta", 0), fakeDriver("second", 20), fakeDriver("first", 10), fakeDriver("alpha", 0)} {
		if err := r.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.Names(), []string{"first", "second", "alpha", "zeta"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v (auto order, then by name)", got, want)
	}
	if d, ok := r.Lookup("second"); !ok || d.Auto != 20 {
		t.Errorf("Lookup(second) = %+v, %v", d, ok)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error("Lookup of an unregistered name succeeded")
	}
	bad := []struct {
		d    Driver
		want string
	}{
		{fakeDriver("first", 1), "registered twice"},
		{fakeDriver("", 1), "lower-case"},
		{fakeDriver("Docker", 1), "lower-case"},
		{fakeDriver(BackendAuto, 1), "keyword"},
		{fakeDriver(BackendNone, 1), "keyword"},
		{Driver{Name: "noopen"}, "required"},
		{withSection(fakeDriver("common", 0), "scope"), "common key"},
		{withSection(fakeDriver("twin", 0), "taken"), "already driver"},
		{withSection(fakeDriver("hand", 0), ""), "needs a key"},
	}
	if err := r.Register(withSection(fakeDriver("owner", 0), "taken")); err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		if err := r.Register(b.d); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Register(%q) = %v, want an error containing %q", b.d.Name, err, b.want)
		}
	}
}

func TestCapabilitiesList(t *testing.T) {
	c := Capabilities{ResidentAgent: true, Remote: true}
	if got := c.List(); !slices.Equal(got, []string{"resident agent", "remote"}) {
		t.Errorf("List = %v", got)
	}
}

func withSection(d Driver, key string) Driver {
	d.Config = NewSection[struct{}](key, nil, nil)
	return d
}
