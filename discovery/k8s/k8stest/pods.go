package k8stest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var nsCounter atomic.Int64

// Namespace creates a fresh namespace (namespaces never finish deleting here, so every test
// takes its own).
func (s *Server) Namespace(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, nsCounter.Add(1))
	_, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return name, err
}

// PodSpec describes a pod for CreatePod.
type PodSpec struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
}

// CreatePod creates a pod bound to a fake node, so that a graceful delete leaves it
// Terminating (deletionTimestamp set) until DeletePod with grace 0, as a kubelet would.
func (s *Server) CreatePod(ctx context.Context, p PodSpec) (*corev1.Pod, error) {
	return createPod(ctx, s.Client, p)
}

func createPod(ctx context.Context, client kubernetes.Interface, p PodSpec) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "engine", Image: "engine:test"}},
		},
	}
	return client.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

// SetStatus writes the pod's status through the status subresource, as the kubelet would:
// phase Running (or Pending), the pod IP, and the Ready condition.
func (s *Server) SetStatus(ctx context.Context, ns, name, ip string, running, ready bool) (*corev1.Pod, error) {
	pod, err := s.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return WriteStatus(ctx, s.Client, pod, ip, running, ready)
}

// WriteStatus is SetStatus on a pod object the caller holds (the answer of a create or of an
// earlier write), so it costs one request; pod is modified. A stale resourceVersion fails
// with a conflict.
func WriteStatus(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ip string, running, ready bool) (*corev1.Pod, error) {
	pod.Status.Phase = corev1.PodPending
	if running {
		pod.Status.Phase = corev1.PodRunning
	}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = nil
	if ip != "" {
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.Now()}}
	return client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// ReadyPod creates a pod and makes it Running and Ready at ip.
func (s *Server) ReadyPod(ctx context.Context, p PodSpec, ip string) (*corev1.Pod, error) {
	if _, err := s.CreatePod(ctx, p); err != nil {
		return nil, err
	}
	return s.SetStatus(ctx, p.Namespace, p.Name, ip, true, true)
}

// DeletePod deletes a pod with the given grace period in seconds; 0 removes it at once
// (a force delete), a positive grace leaves it Terminating.
func (s *Server) DeletePod(ctx context.Context, ns, name string, grace int64) error {
	return s.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}
