package k8s

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig finds credentials as the spec orders them: the in-cluster ServiceAccount, else
// $KUBECONFIG, else ~/.kube/config.
func restConfig() (*rest.Config, error) {
	if c, err := rest.InClusterConfig(); err == nil {
		return c, nil
	} else if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("cannot load in-cluster credentials: %w", err)
	}
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no in-cluster credentials, KUBECONFIG unset and no home directory: %w", err)
		}
		path = filepath.Join(home, ".kube", "config")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no in-cluster credentials and no kubeconfig at %s (set KUBECONFIG or run with a ServiceAccount): %w", path, err)
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("cannot load kubeconfig %s: %w", path, err)
	}
	return c, nil
}
