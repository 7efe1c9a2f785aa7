package k8s

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/smg-go/smg/discovery"
)

// podOf copies what discovery reads from a pod. The maps are shared with the informer's
// cache object, which nobody modifies (client-go's contract for cached objects).
func podOf(p *corev1.Pod) discovery.Pod {
	out := discovery.Pod{
		Namespace:   p.Namespace,
		Name:        p.Name,
		UID:         string(p.UID),
		Labels:      p.Labels,
		Annotations: p.Annotations,
		Terminating: p.DeletionTimestamp != nil,
		IP:          p.Status.PodIP,
		Running:     p.Status.Phase == corev1.PodRunning,
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
			break
		}
	}
	return out
}

// podsOf converts the objects of an informer store, skipping anything that is not a pod.
func podsOf(objs []any) []discovery.Pod {
	out := make([]discovery.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, podOf(p))
		}
	}
	return out
}

// byPodIP names the informer index of pods by status.podIP.
const byPodIP = "podIP"

func podIPIndex(obj any) ([]string, error) {
	if ip := podIP(obj); ip != "" {
		return []string{ip}, nil
	}
	return nil, nil
}

// podIP is the IP of an informer event's pod (a deleted one may come as a tombstone), or "".
func podIP(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		return p.Status.PodIP
	}
	return ""
}
