module github.com/herdbridge/herdbridge

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	go.etcd.io/bbolt v1.5.0
)

require (
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
