neither:
  http.query:
    - name: http://127.0.0.1:9/health

refused_status:
  http.query:
    - name: http://127.0.0.1:9/health
    - status: 200

refused_match_list:
  http.query:
    - name: http://127.0.0.1:9/health
    - match: ok
    - status: [200, 204]
    - status_type: list

waited:
  http.wait_for_successful_query:
    - name: http://127.0.0.1:9/health
    - status: 200
    - wait_for: 0
