// Package policy declares the Builder and Picker interfaces every load-balancing policy implements.
package policy
