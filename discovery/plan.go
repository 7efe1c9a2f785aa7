package discovery

import (
	"sort"

	"github.com/smg-go/smg/worker"
)

// Registered is a worker this gateway's discovery registered and the registry still holds.
type Registered struct {
	ID     string
	URL    string
	PodUID string
	Status worker.Status
}

// Removal is one RemoveWorker job: every registration at one address, pinned by id so that a
// worker registered there in the meantime is left alone (spec: Removal Flow, step 1).
type Removal struct {
	URL    string
	PodUID string
	IDs    []string
}

// Plan is what one reconcile pass submits.
type Plan struct {
	Add    []Desired
	Remove []Removal
}

// Diff compares the desired workers with the registered ones and returns the jobs that close
// the gap. occupied reports a URL the registry holds for someone else (--worker-urls, the
// worker API, a mesh peer): discovery never touches such a worker, and does not try to add
// over it either.
//
// An owned worker whose address is desired under a different pod UID was replaced (a restart
// that kept its IP): it is removed now and the new pod's worker added on a later pass, once
// the removal has finished (both jobs share the address key).
func Diff(desired []Desired, owned []Registered, occupied func(url string) bool) Plan {
	want := make(map[string]*Desired, len(desired))
	for i := range desired {
		want[desired[i].URL] = &desired[i]
	}
	byURL := map[string][]Registered{}
	for _, r := range owned {
		byURL[r.URL] = append(byURL[r.URL], r)
	}
	var plan Plan
	for url, regs := range byURL {
		d := want[url]
		stale := regs[:0:0]
		for _, r := range regs {
			if d == nil || r.PodUID != d.PodUID {
				stale = append(stale, r)
			}
		}
		if len(stale) == 0 {
			continue
		}
		rm := Removal{URL: url, PodUID: stale[0].PodUID}
		for _, r := range stale {
			rm.IDs = append(rm.IDs, r.ID)
		}
		plan.Remove = append(plan.Remove, rm)
	}
	for i := range desired {
		d := &desired[i]
		if len(byURL[d.URL]) > 0 || (occupied != nil && occupied(d.URL)) {
			continue
		}
		plan.Add = append(plan.Add, *d)
	}
	sort.Slice(plan.Remove, func(i, j int) bool { return plan.Remove[i].URL < plan.Remove[j].URL })
	return plan
}
