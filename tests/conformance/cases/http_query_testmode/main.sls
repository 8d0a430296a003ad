predicted:
  http.query:
    - name: http://127.0.0.1:9/health
    - match: ok
    - status: 200

with_test_url:
  http.query:
    - name: http://127.0.0.1:9/health
    - status: 200
    - test_url: http://127.0.0.1:9/test
