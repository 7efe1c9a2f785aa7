package discovery

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	d := func(url, uid string) Desired { return Desired{URL: url, PodUID: uid} }
	r := func(id, url, uid string) Registered { return Registered{ID: id, URL: url, PodUID: uid} }
	none := func(string) bool { return false }
	tests := []struct {
		name     string
		desired  []Desired
		owned    []Registered
		occupied func(string) bool
		add      []string
		remove   []Removal
	}{
		{"empty", nil, nil, none, nil, nil},
		{"add missing", []Desired{d("u1", "a"), d("u2", "a")}, []Registered{r("1", "u1", "a")}, none, []string{"u2"}, nil},
		{"remove gone", nil, []Registered{r("1", "u1", "a")}, none, nil, []Removal{{URL: "u1", PodUID: "a", IDs: []string{"1"}}}},
		{"in step", []Desired{d("u1", "a")}, []Registered{r("1", "u1", "a")}, none, nil, nil},
		{"replaced pod: remove first, add later", []Desired{d("u1", "b")}, []Registered{r("1", "u1", "a")}, none,
			nil, []Removal{{URL: "u1", PodUID: "a", IDs: []string{"1"}}}},
		{"never add over a worker someone else registered", []Desired{d("u1", "a")}, nil, func(u string) bool { return u == "u1" }, nil, nil},
		{"every registration at the address", nil, []Registered{r("1", "u1", "a"), r("2", "u1", "a")}, none,
			nil, []Removal{{URL: "u1", PodUID: "a", IDs: []string{"1", "2"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(tc.desired, tc.owned, tc.occupied)
			var add []string
			for _, a := range p.Add {
				add = append(add, a.URL)
			}
			if !reflect.DeepEqual(add, tc.add) || !reflect.DeepEqual(p.Remove, tc.remove) {
				t.Fatalf("plan add=%v remove=%+v, want add=%v remove=%+v", add, p.Remove, tc.add, tc.remove)
			}
		})
	}
}
