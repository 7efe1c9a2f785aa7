// Package deploy holds no code: its tests check the deployment files beside them (the
// Grafana dashboard and the Prometheus alert rules) against a real gateway's /metrics.
package deploy
