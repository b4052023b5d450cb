"""Wide & deep on census-like data, exported for serving raw records (TF's canonical deployment).

String columns go through a vocabulary list, a vocabulary file and hash buckets, an int column
through identity ids, age through buckets and a cross. The export maps raw strings to ids with the
same lookups before its torch.export program, so the loaded model serves records (dicts or JSON
lines) without any model code, and its scores equal predict()'s.
"""

import json
import os
import tempfile

import numpy as np
import pandas as pd

import estimator_engine as ee

fc = ee.feature_column
rng = np.random.RandomState(0)
rows = 2000
education_levels = ["Bachelors", "HS-grad", "Masters", "Doctorate", "Some-college", "Assoc-voc"]
frame = pd.DataFrame({
    "age": rng.randint(17, 80, rows).astype("float32"),
    "hours_per_week": rng.uniform(5, 70, rows).astype("float32"),
    "education": rng.choice(education_levels, rows),
    "occupation": rng.choice(["Sales", "Tech-support", "Exec-managerial", "Craft-repair", "Adm-clerical"], rows),
    "relationship": rng.choice(["Husband", "Wife", "Own-child", "Unmarried"], rows),
    "workclass_id": rng.randint(0, 6, rows),
})
label = (((frame["age"] > 35) & frame["education"].isin(["Bachelors", "Masters", "Doctorate"]))
         | (frame["hours_per_week"] > 55)).astype("int64")
work_dir = tempfile.mkdtemp(prefix="census_")
vocabulary_file = os.path.join(work_dir, "relationship.txt")
with open(vocabulary_file, "w") as f:
    f.write("Husband\nWife\nOwn-child\nUnmarried\n")

education = fc.categorical_column_with_vocabulary_list("education", education_levels[:4], num_oov_buckets=2)
occupation = fc.categorical_column_with_hash_bucket("occupation", hash_bucket_size=100)
relationship = fc.categorical_column_with_vocabulary_file("relationship", vocabulary_file, num_oov_buckets=1)
workclass = fc.categorical_column_with_identity("workclass_id", num_buckets=8, default_value=7)
age = fc.numeric_column("age")
age_buckets = fc.bucketized_column(age, [25, 30, 35, 40, 45, 50, 55, 60, 65])
wide_columns = [education, occupation, relationship, workclass, age_buckets,
                fc.crossed_column([age_buckets, "education", "occupation"], hash_bucket_size=1000)]
deep_columns = [age, fc.numeric_column("hours_per_week"), fc.indicator_column(education),
                fc.indicator_column(relationship), fc.embedding_column(occupation, dimension=8),
                fc.embedding_column(workclass, dimension=3)]

model = ee.DNNLinearCombinedClassifier(
    model_dir=os.path.join(work_dir, "model"), linear_feature_columns=wide_columns,
    dnn_feature_columns=deep_columns, dnn_hidden_units=[32, 16],
    config=ee.RunConfig(tf_random_seed=0, save_checkpoints_steps=300, save_checkpoints_secs=None))
train, evaluation = frame.iloc[:1600], frame.iloc[1600:]
receiver_fn = ee.export.build_parsing_serving_input_receiver_fn(
    ee.make_parse_example_spec(wide_columns + deep_columns))
metrics, exports = ee.train_and_evaluate(
    model,
    ee.TrainSpec(ee.inputs.pandas_input_fn(train, label.iloc[:1600], batch_size=64, num_epochs=None,
                                           shuffle=True), max_steps=300),
    ee.EvalSpec(ee.inputs.pandas_input_fn(evaluation, label.iloc[1600:], batch_size=200, shuffle=False),
                steps=None, throttle_secs=0, exporters=ee.exporter.LatestExporter("census", receiver_fn)))
print({key: round(float(value), 4) for key, value in metrics.items()})

serve = ee.export.load(exports[0])  # needs neither this script nor pickle
requests = [{"age": 45, "hours_per_week": 50.0, "education": "Masters", "occupation": "Exec-managerial",
             "relationship": "Husband", "workclass_id": 2},
            {"age": 23, "hours_per_week": 20.0, "education": "Preschool",  # unseen: an OOV bucket
             "occupation": "Astronaut", "relationship": "Cousin", "workclass_id": 42}]
served = serve("\n".join(json.dumps(r) for r in requests))["scores"]
predicted = next(model.predict(ee.inputs.pandas_input_fn(pd.DataFrame(requests), shuffle=False),
                               yield_single_examples=False))["probabilities"]
print("served", np.round(served.numpy(), 4).tolist(), "max |served - predict|",
      float(np.abs(served.numpy() - predicted).max()))
