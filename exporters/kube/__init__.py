"""Kubernetes as a source of the GPU → job mapping: the kubelet's PodResources API says which container
holds which GPU, a field-selected watch of the node's pods on the API server says whose pod it is, and
the pod's labels and owner say which training job and rank it belongs to."""
